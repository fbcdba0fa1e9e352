import { createHash } from "node:crypto";
import { isJsonObject, isLaneName, type LaneName } from "@shoal/common";

/** A request rate: a token bucket refilled at `perSecond`, holding at most `burst`. */
export interface RateSpec {
  readonly perSecond: number;
  readonly burst: number;
}

/** One API key as configured. Only the key's SHA-256 is kept, never the key itself. */
export interface ApiKeySpec {
  readonly tenant: string;
  readonly sha256: Buffer;
  /** Models the key may use: `*` (every model) or a list of ids. */
  readonly models: "*" | readonly string[];
  /** Lane of calls that name none. */
  readonly lane: LaneName;
  /** Calls per second (any RPC but health and reflection); no limit when absent. */
  readonly requests?: RateSpec;
  /** Estimated prompt tokens per second of Embed calls; no limit when absent. */
  readonly tokens?: RateSpec;
  /** What the key may do besides inference and listing: `admin` (ModelAdminService: add, remove, alias models). */
  readonly scopes?: readonly ApiKeyScope[];
  /** Where the key was configured (`SHOAL_API_KEYS[1]`, `keys.yaml: keys[0]`), for messages. */
  readonly source: string;
}

/** Scopes a key may carry: `admin` changes the model registry (ModelAdminService). */
export type ApiKeyScope = "admin";
export const API_KEY_SCOPES: readonly ApiKeyScope[] = ["admin"];

// RFC 6750 b64token: what may follow "Bearer " in an authorization header.
export const BEARER_TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;
const MIN_KEY_CHARS = 16;
const TENANT = /^[A-Za-z0-9._-]{1,64}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/i;
const FIELDS = new Set(["tenant", "key", "sha256", "models", "lane", "requestsPerSecond", "burst", "tokensPerSecond", "tokenBurst", "scopes"]);

/** SHA-256 of an API key, the form in which keys are stored and compared. */
export function hashApiKey(key: string): Buffer {
  return createHash("sha256").update(key, "utf8").digest();
}

/**
 * Checks one key's fields (from the file, or split out of the compact env form, where every value
 * is a string) and builds its spec; problems go to `problems`, each naming `where` but never the key.
 */
function toSpec(fields: Record<string, unknown>, where: string, problems: string[]): ApiKeySpec | undefined {
  const before = problems.length;
  for (const name of Object.keys(fields)) if (!FIELDS.has(name)) problems.push(`${where}.${name}: unknown field`);
  const tenant = fields["tenant"];
  if (typeof tenant !== "string" || !TENANT.test(tenant)) problems.push(`${where}.tenant: required, 1-64 letters, digits, '.', '_', '-'`);

  let sha256: Buffer | undefined;
  const key = fields["key"];
  const digest = fields["sha256"];
  if ((key === undefined) === (digest === undefined)) problems.push(`${where}: give exactly one of key and sha256`);
  else if (key !== undefined) {
    if (typeof key !== "string" || !BEARER_TOKEN.test(key) || key.length < MIN_KEY_CHARS) {
      problems.push(`${where}.key: expected at least ${MIN_KEY_CHARS} characters of A-Z a-z 0-9 . _ ~ + / - (then optional '=')`);
    } else sha256 = hashApiKey(key);
  } else if (typeof digest !== "string" || !SHA256_HEX.test(digest)) {
    problems.push(`${where}.sha256: expected 64 hex digits (the SHA-256 of the key)`);
  } else sha256 = Buffer.from(digest, "hex");

  let models: "*" | readonly string[] = "*";
  const rawModels = fields["models"];
  if (rawModels !== undefined && rawModels !== "*") {
    const list = typeof rawModels === "string" ? rawModels.split("|").map((m) => m.trim()) : rawModels;
    if (!Array.isArray(list) || list.length === 0 || !list.every((m): m is string => typeof m === "string" && m !== "")) {
      problems.push(`${where}.models: expected '*' or a non-empty list of model ids`);
    } else models = list.includes("*") ? "*" : Object.freeze([...new Set(list)]);
  }

  const lane = fields["lane"] ?? "interactive";
  if (!isLaneName(lane)) problems.push(`${where}.lane: expected interactive or batch`);

  const scopes = scopesOf(fields["scopes"], where, problems);
  const requests = rate(fields, "requestsPerSecond", "burst", where, problems);
  const tokens = rate(fields, "tokensPerSecond", "tokenBurst", where, problems);
  if (problems.length > before || sha256 === undefined) return undefined;
  return Object.freeze({
    tenant: tenant as string,
    sha256,
    models,
    lane: lane as LaneName,
    scopes,
    ...(requests ? { requests } : {}),
    ...(tokens ? { tokens } : {}),
    source: where,
  });
}

/** `scopes`: a list (file) or `|`-separated names (env form); each one of API_KEY_SCOPES. */
function scopesOf(raw: unknown, where: string, problems: string[]): readonly ApiKeyScope[] {
  if (raw === undefined) return Object.freeze([]);
  const list = typeof raw === "string" ? raw.split("|").map((s) => s.trim()) : raw;
  if (!Array.isArray(list) || !list.every((s): s is ApiKeyScope => (API_KEY_SCOPES as readonly unknown[]).includes(s))) {
    problems.push(`${where}.scopes: expected a list of ${API_KEY_SCOPES.join(", ")}`);
    return Object.freeze([]);
  }
  return Object.freeze([...new Set(list)]);
}

/** A positive number from a file (a number) or the env form (a numeric string). */
function positive(v: unknown): number | undefined {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : Number.NaN;
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

function rate(fields: Record<string, unknown>, rateField: string, burstField: string, where: string, problems: string[]): RateSpec | undefined {
  const rawRate = fields[rateField];
  const rawBurst = fields[burstField];
  if (rawRate === undefined) {
    if (rawBurst !== undefined) problems.push(`${where}.${burstField}: needs ${rateField}`);
    return undefined;
  }
  const perSecond = positive(rawRate);
  if (perSecond === undefined) problems.push(`${where}.${rateField}: expected a positive number`);
  // Without an explicit burst, a second's worth (at least one call) may arrive at once.
  const burst = rawBurst === undefined ? Math.max(1, perSecond ?? 1) : positive(rawBurst);
  if (burst === undefined || burst < 1) problems.push(`${where}.${burstField}: expected a number >= 1`);
  return perSecond !== undefined && burst !== undefined ? Object.freeze({ perSecond, burst }) : undefined;
}

/**
 * Parses `SHOAL_API_KEYS`: keys separated by `,`; each `tenant=key` (or `tenant=sha256:<hex>`)
 * followed by `;name=value` options, the names of the file's fields, `models` and `scopes` separated by `|`:
 *
 *   acme=sk-acme-0123456789abcdef;models=embedder-a|embedder-b;lane=batch;requestsPerSecond=5;burst=10,
 *   ops=sha256:9f86d08188...;tokensPerSecond=20000;scopes=admin
 */
export function parseApiKeysEnv(raw: string, problems: string[], name = "SHOAL_API_KEYS"): ApiKeySpec[] {
  const specs: ApiKeySpec[] = [];
  const entries = raw
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  entries.forEach((entry, i) => {
    const where = `${name}[${i}]`;
    const [head = "", ...options] = entry.split(";").map((p) => p.trim());
    const eq = head.indexOf("=");
    if (eq <= 0) {
      problems.push(`${where}: expected tenant=key (or tenant=sha256:<hex>) first`);
      return;
    }
    const fields: Record<string, unknown> = { tenant: head.slice(0, eq).trim() };
    const secret = head.slice(eq + 1).trim();
    if (secret.toLowerCase().startsWith("sha256:")) fields["sha256"] = secret.slice("sha256:".length);
    else fields["key"] = secret;
    for (const option of options) {
      if (option === "") continue;
      const at = option.indexOf("=");
      const field = at > 0 ? option.slice(0, at).trim() : "";
      if (field === "" || field === "tenant" || field === "key" || field === "sha256") {
        problems.push(
          `${where}: '${field || option}' is not an option (expected name=value: models, lane, requestsPerSecond, burst, tokensPerSecond, tokenBurst, scopes)`,
        );
        continue;
      }
      fields[field] = option.slice(at + 1).trim();
    }
    const spec = toSpec(fields, where, problems);
    if (spec) specs.push(spec);
  });
  if (entries.length === 0) problems.push(`${name}: no keys (unset it to turn API keys off)`);
  return specs;
}

/**
 * Parses an API keys file (YAML or JSON, already parsed into `doc`):
 * `{ keys: [{ tenant, key | sha256, models, lane, requestsPerSecond, burst, tokensPerSecond, tokenBurst, scopes }] }`
 * (`scopes: [admin]`: the key may change the model registry).
 */
export function parseApiKeysDocument(doc: unknown, source: string, problems: string[]): ApiKeySpec[] {
  if (!isJsonObject(doc) || !Array.isArray(doc["keys"])) {
    problems.push(`${source}: expected a mapping with a 'keys' list`);
    return [];
  }
  for (const name of Object.keys(doc)) if (name !== "keys") problems.push(`${source}: ${name}: unknown field`);
  const keys = doc["keys"] as unknown[];
  if (keys.length === 0) problems.push(`${source}: no keys (unset SHOAL_API_KEYS_FILE to turn API keys off)`);
  const specs: ApiKeySpec[] = [];
  keys.forEach((entry, i) => {
    const where = `${source}: keys[${i}]`;
    if (!isJsonObject(entry)) {
      problems.push(`${where}: expected a mapping`);
      return;
    }
    const spec = toSpec(entry, where, problems);
    if (spec) specs.push(spec);
  });
  return specs;
}

/** Reports keys configured twice (same hash), naming both places. */
export function checkDuplicateKeys(specs: readonly ApiKeySpec[], problems: string[]): void {
  const seen = new Map<string, string>();
  for (const spec of specs) {
    const hex = spec.sha256.toString("hex");
    const first = seen.get(hex);
    if (first !== undefined) problems.push(`${spec.source}: the same key as ${first}`);
    else seen.set(hex, spec.source);
  }
}
