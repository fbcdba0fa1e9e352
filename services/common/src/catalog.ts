import { readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import bytes from "bytes";
import { parse as parseYaml } from "yaml";
import { isJsonObject, type JsonObject } from "./json.ts";
import { readModelManifest, type ModelSpec } from "./model-manifest.ts";
import { locateEntry } from "./catalog-source.ts";
import { findEmbedder, compositeSpec, isCompositeEntry, parseCompositeEntry, type CompositeEntry, type CompositeScoring } from "./composite-model.ts";

/** A pool of workers: one consumer group over its own jobs topics. */
/**
 * How a pool's workers take jobs: `share` — one shared queue, any idle worker takes any waiting
 * job (a Kafka share group); `group` — a consumer group, each partition owned by one worker.
 */
export type IntakeKind = "share" | "group";
export const INTAKE_KINDS: readonly IntakeKind[] = ["share", "group"];

export interface PoolSpec {
  readonly name: string;
  /** How the pool's workers take jobs (default `share`). */
  readonly intake: IntakeKind;
  /**
   * Partitions of each of the pool's jobs topics. In a consumer group, the most workers that can
   * share the pool. In a share group, every member of a partition competes for its records, but
   * Kafka's assignor hashes each member to one partition when there are more partitions than
   * members, so a share pool wants no more partitions than workers (default 1: one partition
   * takes tens of thousands of jobs a second).
   */
  readonly partitions: number;
  /**
   * `per-lane` (default): one jobs topic per lane, every model's jobs in it. `per-model`: one jobs
   * topic per model and lane (a queue per model; share intake only), so a worker takes one model's
   * jobs at a time and forms full batches of it instead of one call per model in a fetch.
   */
  readonly jobTopics: JobTopicLayout;
  /** Ids of the models served by this pool, sorted. */
  readonly models: readonly string[];
  /**
   * Workers the operator plans for the pool (optional): gateways and workers check at start that
   * Kafka's share-group limits fit that many (docs/capacity.md); absent, the workers seen in the
   * pool's share group stand in.
   */
  readonly workers?: number;
}

/** How a pool's jobs are laid out on topics (see PoolSpec.jobTopics). */
export type JobTopicLayout = "per-lane" | "per-model";
export const JOB_TOPIC_LAYOUTS: readonly JobTopicLayout[] = ["per-lane", "per-model"];

/** Per-model batching overrides (the worker's defaults apply to what is left out). */
export interface ModelBatching {
  readonly policy?: "token-budget" | "fixed-window";
  readonly maxBatchTokens?: number;
  readonly maxBatchItems?: number;
  readonly maxWaitMs?: number;
}

/** Runtime sidecars a worker can start (services/sidecar-<name>). */
export const SIDECARS = ["pytorch"] as const;
export type SidecarName = (typeof SIDECARS)[number];

/**
 * What runs a model: onnxruntime-node inside the worker (the default), or a runtime sidecar process
 * the worker starts next to it, reading the model's Hugging Face folder (`weights`).
 */
export type ModelRuntime = { readonly kind: "onnx" } | { readonly kind: "sidecar"; readonly sidecar: SidecarName; readonly weightsDir: string };

/** One model the cluster serves. */
export interface CatalogModel {
  readonly id: string;
  readonly pool: string;
  readonly spec: ModelSpec;
  readonly batching: ModelBatching;
  /** Kept resident once loaded: the worker never evicts it. */
  readonly pinned: boolean;
  /** Resident memory estimate per session from the catalog (`memory`), else the manifest's. */
  readonly memoryBytes: number | undefined;
  /** Absent means `onnx`. */
  readonly runtime?: ModelRuntime;
  /** Model registry: where the files come from (a folder path, an `hf:` id); absent before the registry has it. */
  readonly source?: string;
  /** Model registry: what `source` resolved to when the model was added (folder fingerprint, Hub commit sha). */
  readonly revision?: string;
  /** The ONNX export run when the repository has several (catalog `onnx`, AddModel `onnx_variant`; see onnxVariantFile). */
  readonly onnxVariant?: string;
  /** The manifest `spec` was validated from (an `hf:` model's; a registry record carries it so that workers can fetch the files later). */
  readonly manifest?: JsonObject;
  /**
   * Fetches the model's files into this host's cache when they are not there yet (an `hf:` model
   * a worker knows from its registry record before its first need). Absent: the files are here.
   */
  readonly ensureFiles?: () => Promise<void>;
  /**
   * Set for a composite (`biEncoder` / `zeroShot` entries): a reranker or classifier that scores
   * through the named embedder of this catalog; its `spec` carries the embedder's files and limits.
   */
  readonly composite?: CompositeScoring;
}

export interface Catalog {
  readonly path: string;
  readonly pools: ReadonlyMap<string, PoolSpec>;
  readonly models: ReadonlyMap<string, CatalogModel>;
}

/** Every problem found in a catalog file, each naming the file, the model and the field. */
export class CatalogError extends Error {
  override readonly name = "CatalogError";
  constructor(readonly problems: readonly string[]) {
    super(`invalid model catalog:\n  - ${problems.join("\n  - ")}`);
  }
}

const DEFAULT_POOL = "default";
const DEFAULT_PARTITIONS: Record<IntakeKind, number> = { share: 1, group: 8 };
const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

function parseBatching(raw: unknown, where: string, problems: string[]): ModelBatching {
  if (raw === undefined) return Object.freeze({});
  if (!isJsonObject(raw)) {
    problems.push(`${where}: expected a mapping`);
    return Object.freeze({});
  }
  const out: { -readonly [K in keyof ModelBatching]: ModelBatching[K] } = {};
  for (const [key, value] of Object.entries(raw)) {
    if (key === "policy") {
      if (value === "token-budget" || value === "fixed-window") out.policy = value;
      else problems.push(`${where}.policy: expected token-budget or fixed-window`);
    } else if (key === "maxBatchTokens" || key === "maxBatchItems" || key === "maxWaitMs") {
      if (typeof value === "number" && Number.isInteger(value) && value >= (key === "maxWaitMs" ? 0 : 1)) out[key] = value;
      else problems.push(`${where}.${key}: expected a ${key === "maxWaitMs" ? "non-negative" : "positive"} integer`);
    } else problems.push(`${where}.${key}: unknown field`);
  }
  return Object.freeze(out);
}

/** `runtime` and `weights` of a catalog entry; a sidecar's weights folder must hold a config.json. */
async function parseRuntime(raw: Record<string, unknown>, dir: string, env: NodeJS.ProcessEnv, where: string, problems: string[]): Promise<ModelRuntime> {
  const value = raw["runtime"] ?? "onnx";
  const sidecar = typeof value === "string" && value.startsWith("sidecar:") ? value.slice("sidecar:".length) : undefined;
  if (value !== "onnx" && !(SIDECARS as readonly (string | undefined)[]).includes(sidecar)) {
    problems.push(`${where}.runtime: expected onnx or ${SIDECARS.map((n) => `sidecar:${n}`).join(", ")} (got ${JSON.stringify(value)})`);
    return { kind: "onnx" };
  }
  if (sidecar === undefined) {
    if (raw["weights"] !== undefined) problems.push(`${where}.weights: only a sidecar runtime reads weights`);
    return { kind: "onnx" };
  }
  // A Hub-layout folder (config.json beside its files) is its own weights folder; a Shoal directory keeps them in torch/.
  const hubLayout = await stat(join(dir, "config.json")).then(
    (st) => st.isFile(),
    () => false,
  );
  const weights = raw["weights"] ?? (hubLayout ? "." : "torch");
  if (typeof weights !== "string") {
    problems.push(`${where}.weights: expected a folder path`);
    return { kind: "onnx" };
  }
  const weightsDir = resolve(dir, expand(weights, env, problems, `${where}.weights`));
  try {
    if (!(await stat(join(weightsDir, "config.json"))).isFile()) throw new Error("not a file");
  } catch {
    problems.push(`${where}.weights: ${weightsDir} has no config.json (a Hugging Face model folder is expected)`);
  }
  return { kind: "sidecar", sidecar: sidecar as SidecarName, weightsDir };
}

/** Expands `${VAR}` and `${VAR:-fallback}` from the environment. */
function expand(value: string, env: NodeJS.ProcessEnv, problems: string[], where: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, fallback?: string) => {
    const v = env[name];
    if (v !== undefined && v !== "") return v;
    if (fallback !== undefined) return fallback;
    problems.push(`${where}: environment variable ${name} is not set`);
    return "";
  });
}

/** A size: a positive integer (bytes) or a string such as `120MiB`, `1.5GB` (1024-based); null when invalid. */
export function parseByteSize(value: unknown): number | null {
  const n =
    typeof value === "number"
      ? value
      : typeof value === "string" && /^\s*\d+(\.\d+)?\s*([kmgt]i?b|b)?\s*$/i.test(value)
        ? bytes.parse(value.replace(/ib\b/i, "b"))
        : null;
  return n !== null && Number.isFinite(n) && n > 0 ? Math.round(n) : null;
}

/**
 * Loads and validates a YAML model catalog:
 *
 * ```yaml
 * pools:
 *   default: { intake: share }       # or group; partitions: 1 (share) / 8 (group) by default;
 *                                    #   jobTopics: per-lane (default) or per-model (share only);
 *                                    #   workers: the pool size planned, for the capacity check
 * models:
 *   - path: ${SHOAL_MODELS}/minilm   # a model folder (relative to this file): a Hugging Face
 *                                    #   repository's layout, or one with a shoal-model.json
 *   - source: hf:BAAI/bge-small-en-v1.5@main   # or a Hub id (HF_ENDPOINT, HF_TOKEN, fetched
 *                                    #   into the huggingface_hub cache); id defaults to its name
 *     id: my-embedder                # optional, defaults to the manifest's id
 *     pool: default                  # optional
 *     pinned: true                   # optional: never evicted once loaded
 *     memory: 120MiB                 # optional: resident size per session (else the manifest's,
 *                                    #   else estimated from the ONNX file)
 *     onnx: qint8_avx512             # optional: the ONNX export onnx/model_qint8_avx512.onnx
 *                                    #   (or a path ending in .onnx); default onnx/model.onnx
 *     runtime: onnx                  # optional: or sidecar:pytorch (a PyTorch process beside the
 *                                    #   worker, reading the Hugging Face folder `weights`)
 *     weights: torch                 # optional, sidecar only: relative to the model directory
 *     batching:                      # optional overrides of the worker's defaults
 *       policy: token-budget         # or fixed-window
 *       maxBatchTokens: 8192
 *       maxBatchItems: 64
 *       maxWaitMs: 2
 *   - id: bge-small-ranker           # a composite: no path, scores through an embedder of this
 *     biEncoder: { embedder: my-embedder }   #   catalog (or zeroShot: see composite-model.ts)
 * ```
 */
export async function loadCatalog(path: string, env: NodeJS.ProcessEnv = process.env): Promise<Catalog> {
  const file = resolve(path);
  const problems: string[] = [];
  let doc: unknown;
  try {
    doc = parseYaml(await readFile(file, "utf8"));
  } catch (err) {
    throw new CatalogError([`${file}: ${(err as Error).message}`]);
  }
  if (!isJsonObject(doc)) throw new CatalogError([`${file}: expected a mapping with 'models'`]);

  const pools = new Map<string, PoolSpec>();
  const rawPools = doc["pools"] ?? { [DEFAULT_POOL]: {} };
  if (!isJsonObject(rawPools)) problems.push(`${file}: pools: expected a mapping`);
  else {
    for (const [name, raw] of Object.entries(rawPools)) {
      const where = `${file}: pools.${name}`;
      if (!NAME.test(name)) problems.push(`${where}: name must match ${NAME}`);
      const rawIntake = isJsonObject(raw) ? (raw["intake"] ?? "share") : "share";
      const intake: IntakeKind = INTAKE_KINDS.find((k) => k === rawIntake) ?? "share";
      if (intake !== rawIntake) problems.push(`${where}.intake: expected one of ${INTAKE_KINDS.join(", ")} (got ${JSON.stringify(rawIntake)})`);
      const partitions = isJsonObject(raw) ? (raw["partitions"] ?? DEFAULT_PARTITIONS[intake]) : DEFAULT_PARTITIONS[intake];
      if (!Number.isInteger(partitions) || (partitions as number) < 1 || (partitions as number) > 1024) {
        problems.push(`${where}.partitions: expected an integer in 1..1024`);
      }
      const rawLayout = isJsonObject(raw) ? (raw["jobTopics"] ?? "per-lane") : "per-lane";
      const jobTopics: JobTopicLayout = JOB_TOPIC_LAYOUTS.find((k) => k === rawLayout) ?? "per-lane";
      if (jobTopics !== rawLayout) problems.push(`${where}.jobTopics: expected one of ${JOB_TOPIC_LAYOUTS.join(", ")} (got ${JSON.stringify(rawLayout)})`);
      if (jobTopics === "per-model" && intake !== "share") problems.push(`${where}.jobTopics: per-model needs intake: share`);
      const workers = isJsonObject(raw) ? raw["workers"] : undefined;
      if (workers !== undefined && (!Number.isInteger(workers) || (workers as number) < 1)) problems.push(`${where}.workers: expected a positive integer`);
      pools.set(name, { name, intake, partitions: Number(partitions), jobTopics, models: [], ...(workers === undefined ? {} : { workers: Number(workers) }) });
    }
  }

  const models = new Map<string, CatalogModel>();
  const rawModels = doc["models"];
  if (!Array.isArray(rawModels) || rawModels.length === 0) {
    problems.push(`${file}: models: expected a non-empty list`);
  } else {
    const composites: CompositeEntry[] = [];
    const loaded = await Promise.all(
      rawModels.map(async (raw: unknown, i: number) => {
        const where = `${file}: models[${i}]`;
        if (!isJsonObject(raw)) return void problems.push(`${where}: expected a mapping`);
        // Resolved once every embedder is read (below).
        if (isCompositeEntry(raw)) {
          const entry = parseCompositeEntry(raw, where, problems);
          if (entry !== undefined) composites.push(entry);
          return undefined;
        }
        const onnxVariant = typeof raw["onnx"] === "string" && raw["onnx"] !== "" ? raw["onnx"] : undefined;
        if (raw["onnx"] !== undefined && onnxVariant === undefined)
          problems.push(`${where}.onnx: expected an ONNX variant such as qint8_avx512, or a path ending in .onnx`);
        const hints = {
          ...(onnxVariant === undefined ? {} : { onnxVariant }),
          runtime: String(raw["runtime"] ?? "").startsWith("sidecar:") ? ("sidecar" as const) : ("onnx" as const),
        };
        const located = await locateEntry(raw, file, env, where, problems, (v, field) => expand(v, env, problems, field), hints);
        if (located === undefined) return undefined;
        const dir = located.dir;
        const pool = raw["pool"] ?? DEFAULT_POOL;
        if (typeof pool !== "string" || !pools.has(pool)) problems.push(`${where}.pool: unknown pool '${String(pool)}'`);
        if (raw["id"] !== undefined && (typeof raw["id"] !== "string" || !NAME.test(raw["id"]))) {
          problems.push(`${where}.id: must match ${NAME}`);
        }
        const batching = parseBatching(raw["batching"], `${where}.batching`, problems);
        const pinned = raw["pinned"] ?? false;
        if (typeof pinned !== "boolean") problems.push(`${where}.pinned: expected true or false`);
        const memory = raw["memory"] === undefined ? undefined : parseByteSize(raw["memory"]);
        if (memory === null) problems.push(`${where}.memory: expected a positive size such as 120MiB or a byte count`);
        const runtime = await parseRuntime(raw, dir, env, where, problems);
        try {
          const givenId = typeof raw["id"] === "string" ? raw["id"] : located.defaultId;
          const { spec, manifest } = await readModelManifest(dir, {
            runtime: runtime.kind,
            ...(givenId === undefined ? {} : { id: givenId }),
            ...(onnxVariant === undefined ? {} : { onnxVariant }),
          });
          const id = givenId ?? spec.id;
          const memoryBytes = memory ?? spec.memoryBytes;
          const from =
            located.source === undefined ? {} : { source: located.source, ...(located.revision === undefined ? {} : { revision: located.revision, manifest }) };
          const variant = onnxVariant === undefined ? {} : { onnxVariant };
          return {
            where,
            model: Object.freeze({ id, pool: String(pool), spec, batching, pinned: pinned === true, memoryBytes, runtime, ...from, ...variant }),
          };
        } catch (err) {
          problems.push(`${where}: ${(err as Error).message}`);
          return undefined;
        }
      }),
    );
    for (const entry of loaded) {
      if (!entry) continue;
      if (models.has(entry.model.id)) problems.push(`${entry.where}.id: duplicate model id '${entry.model.id}'`);
      models.set(entry.model.id, entry.model);
    }
    for (const c of composites) {
      const embedder = findEmbedder(c, models, problems, composites);
      if (embedder === undefined) continue;
      if (models.has(c.id)) problems.push(`${c.where}.id: duplicate model id '${c.id}'`);
      const spec = compositeSpec(c.id, c.scoring, embedder.spec);
      models.set(
        c.id,
        Object.freeze({ id: c.id, pool: embedder.pool, spec, batching: Object.freeze({}), pinned: c.pinned, memoryBytes: undefined, composite: c.scoring }),
      );
    }
  }
  if (problems.length > 0) throw new CatalogError(problems);
  for (const [name, pool] of pools)
    pools.set(
      name,
      Object.freeze({
        ...pool,
        models: Object.freeze(
          [...models.values()]
            .filter((m) => m.pool === name)
            .map((m) => m.id)
            .sort(),
        ),
      }),
    );
  return Object.freeze({ path: file, pools, models });
}
