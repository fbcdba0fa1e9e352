import { createPrivateKey, randomBytes, X509Certificate, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import {
  EnvReader,
  firstExisting,
  parseByteSize,
  parseConfigText,
  readClusterKeys,
  readKafkaSettings,
  readRegistryTopic,
  type KafkaSettings,
} from "@shoal/common";
import type { ConnectionLimits } from "./connection-limits.ts";
import { readDispatchConfig, type DispatchConfig } from "./dispatch/dispatch-config.ts";
import { checkDuplicateKeys, parseApiKeysDocument, parseApiKeysEnv, type ApiKeySpec } from "./api-keys.ts";
import { readBatchConfig, type BatchConfig } from "./batch/batch-config.ts";

/** The gateway's whole configuration, validated once at start. */
export interface GatewayConfig {
  readonly host: string;
  readonly port: number;
  /** Unique per replica; names the replica's reply topic and consumer group. */
  readonly instanceId: string;
  readonly catalogPath: string;
  /**
   * SHOAL_REGISTRY_TOPIC: the model registry's compacted topic (default `shoal.registry`). Change it
   * only to run several Shoal clusters on one Kafka cluster, each with a registry of its own.
   */
  readonly registryTopic: string;
  /** SHOAL_CLUSTER_KEYS / _FILE: keys that sign and check job, result and cancel records (none: off). */
  readonly clusterKeys: readonly Buffer[];
  /** SHOAL_MAX_WORKERS: most worker status entries kept (a flood of forged ids is refused past it). */
  readonly maxWorkers: number;
  /** SHOAL_REGISTRATION_INTERVAL_MS: how often the reply topic is registered on shoal.gateways. */
  readonly registrationIntervalMs: number;
  /**
   * SHOAL_DIRECT_REPLY (default on), _HOST (127.0.0.1), _PORT (0: any free port), _ADVERTISE
   * (host:port workers are told), _STREAMS (default on; 0: one POST per result only, as gateways
   * before result streams): the listener that takes results straight from workers
   * (direct-replies.ts); undefined: off, results come through the reply topic only.
   */
  readonly directReply: { readonly host: string; readonly port: number; readonly advertise: string | undefined; readonly streams: boolean } | undefined;
  readonly kafka: KafkaSettings;
  /** Deadline given to calls that carry none. */
  readonly defaultTimeoutMs: number;
  /** Longest deadline a call may ask for. */
  readonly maxTimeoutMs: number;
  readonly maxInputsPerRequest: number;
  readonly maxInputChars: number;
  readonly maxRequestBytes: number;
  /** A job record not acknowledged by Kafka within this time fails its call with Unavailable. */
  readonly produceTimeoutMs: number;
  /** On SIGTERM: how long in-flight calls may take to finish before the gateway exits. */
  readonly drainGraceMs: number;
  /** Partitions of this replica's reply topic. */
  readonly replyPartitions: number;
  /** Browser origins allowed to call the gateway cross-origin (`*`: any). */
  readonly corsOrigins: readonly string[];
  /** Admission limits per lane, in estimated tokens. */
  readonly admission: {
    readonly interactive: { readonly maxInFlightTokens: number; readonly maxQueuedTokens: number };
    readonly batch: { readonly maxInFlightTokens: number; readonly maxQueuedTokens: number };
  };
  /** The built web console (`npm run build -w services/console`), served at `/console/`. */
  readonly consoleDir: string;
  /** API keys (hashed) from SHOAL_API_KEYS and SHOAL_API_KEYS_FILE; none: authentication is off. */
  readonly apiKeys: readonly ApiKeySpec[];
  /** Certificate chain and private key (PEM): HTTPS with ALPN h2 + http/1.1 instead of plain text. */
  readonly tls: { readonly cert: Buffer; readonly key: Buffer } | undefined;
  /** Limits against slow and greedy peers (connections, streams, timeouts). */
  readonly connectionLimits: ConnectionLimits;
  /** SHOAL_DISPATCH: `shared` (workers pull from the pool's topics) or a routed policy (issue #16). */
  readonly dispatch: DispatchConfig;
  /** SHOAL_INSECURE_PUBLIC=1: serve off loopback without API keys and/or TLS (logged loudly at start). */
  readonly insecurePublic: boolean;
  /** SHOAL_TEI_EMBED_MODEL / SHOAL_TEI_RERANK_MODEL: the models the TEI routes serve (unset: the catalog's first pinned, else first, of the task). */
  readonly tei: { readonly embedModel: string | undefined; readonly rerankModel: string | undefined };
  /** SHOAL_BATCH_*: the OpenAI-compatible Batch API's limits and topics (docs/batch.md). */
  readonly batch: BatchConfig;
  /**
   * SHOAL_EMBED_CACHE_BYTES (default 256 MiB; 0: off): most bytes the embedding cache holds;
   * SHOAL_EMBED_CACHE_QUANTIZED=1: cache dynamic-int8 models too (docs/cache.md).
   */
  readonly embedCache: { readonly maxBytes: number; readonly batchDependentModels: boolean };
}

/** SHOAL_EMBED_CACHE_BYTES when unset. */
export const DEFAULT_EMBED_CACHE_BYTES = 256 * 1024 * 1024;

/** Whether `host` only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

// An origin as browsers send it: scheme, host, optional port; no path.
const ORIGIN = /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$|^https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

/** Reads `SHOAL_*` and `KAFKA_*` variables; throws ConfigError listing every problem. */
export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const r = new EnvReader(env);
  const instanceId = r.string("SHOAL_INSTANCE_ID", `gw-${randomBytes(6).toString("hex")}`);
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(instanceId)) r.problem(`SHOAL_INSTANCE_ID=${instanceId}: use letters, digits, '.', '_', '-'`);
  const catalogPath = r.optionalString("SHOAL_CATALOG");
  if (catalogPath === undefined) r.problem("SHOAL_CATALOG: required (path to the model catalog YAML)");
  const defaultTimeoutMs = r.int("SHOAL_DEFAULT_TIMEOUT_MS", 30_000, { min: 1 });
  const maxTimeoutMs = r.int("SHOAL_MAX_TIMEOUT_MS", 300_000, { min: 1 });
  if (defaultTimeoutMs > maxTimeoutMs) r.problem("SHOAL_DEFAULT_TIMEOUT_MS must not exceed SHOAL_MAX_TIMEOUT_MS");
  // An allowlist: no cross-origin caller unless listed (the console is served same-origin).
  const corsOrigins = r.list("SHOAL_CORS_ORIGINS", []);
  for (const origin of corsOrigins) {
    if (origin !== "*" && !ORIGIN.test(origin)) r.problem(`SHOAL_CORS_ORIGINS: '${origin}' is not '*' or an origin like https://app.example.com:8443`);
  }
  const apiKeys = readApiKeys(r);
  const tls = readTls(r);
  const host = r.string("SHOAL_HOST", "127.0.0.1");
  const insecurePublic = r.optionalString("SHOAL_INSECURE_PUBLIC") === "1";
  if (!isLoopback(host) && !insecurePublic && (apiKeys.length === 0 || tls === undefined)) {
    r.problem(
      `SHOAL_HOST=${host} is not loopback: set API keys (SHOAL_API_KEYS or SHOAL_API_KEYS_FILE) and TLS (SHOAL_TLS_CERT_FILE, SHOAL_TLS_KEY_FILE), or SHOAL_INSECURE_PUBLIC=1 to serve ${apiKeys.length === 0 ? "without keys" : ""}${apiKeys.length === 0 && tls === undefined ? " and " : ""}${tls === undefined ? "in plain text" : ""} anyway`,
    );
  }
  return r.done({
    host,
    insecurePublic,
    connectionLimits: {
      maxConnections: r.int("SHOAL_MAX_CONNECTIONS", 4_096, { min: 1 }),
      maxConcurrentStreams: r.int("SHOAL_MAX_CONCURRENT_STREAMS", 128, { min: 1, max: 65_535 }),
      idleTimeoutMs: r.int("SHOAL_IDLE_TIMEOUT_MS", 120_000, { min: 1_000 }),
      headersTimeoutMs: r.int("SHOAL_HEADERS_TIMEOUT_MS", 10_000, { min: 100 }),
      requestTimeoutMs: r.int("SHOAL_REQUEST_TIMEOUT_MS", 60_000, { min: 100 }),
      sniffTimeoutMs: r.int("SHOAL_SNIFF_TIMEOUT_MS", 5_000, { min: 100 }),
      streamResetBurst: r.int("SHOAL_STREAM_RESET_BURST", 200, { min: 1 }),
      streamResetsPerSecond: r.int("SHOAL_STREAM_RESETS_PER_SECOND", 20, { min: 1 }),
    },
    port: r.int("SHOAL_PORT", 8080, { min: 0, max: 65535 }),
    instanceId,
    catalogPath: catalogPath ?? "",
    registryTopic: readRegistryTopic(r),
    clusterKeys: readClusterKeys(r),
    maxWorkers: r.int("SHOAL_MAX_WORKERS", 1_024, { min: 1 }),
    registrationIntervalMs: r.int("SHOAL_REGISTRATION_INTERVAL_MS", 5_000, { min: 100, max: 60_000 }),
    directReply: readDirectReply(r),
    kafka: readKafkaSettings(r, `shoal-gateway-${instanceId}`),
    defaultTimeoutMs,
    maxTimeoutMs,
    maxInputsPerRequest: r.int("SHOAL_MAX_INPUTS", 256, { min: 1 }),
    maxInputChars: r.int("SHOAL_MAX_INPUT_CHARS", 32_768, { min: 1 }),
    maxRequestBytes: r.int("SHOAL_MAX_REQUEST_BYTES", 8 * 1024 * 1024, { min: 1024 }),
    drainGraceMs: r.int("SHOAL_DRAIN_GRACE_MS", 10_000, { min: 0 }),
    produceTimeoutMs: r.int("SHOAL_PRODUCE_TIMEOUT_MS", 3_000, { min: 100 }),
    replyPartitions: r.int("SHOAL_REPLY_PARTITIONS", 1, { min: 1, max: 64 }),
    corsOrigins,
    admission: {
      interactive: {
        maxInFlightTokens: r.int("SHOAL_MAX_INFLIGHT_TOKENS_INTERACTIVE", 200_000, { min: 1 }),
        maxQueuedTokens: r.int("SHOAL_MAX_QUEUED_TOKENS_INTERACTIVE", 1_000_000, { min: 1 }),
      },
      batch: {
        maxInFlightTokens: r.int("SHOAL_MAX_INFLIGHT_TOKENS_BATCH", 2_000_000, { min: 1 }),
        maxQueuedTokens: r.int("SHOAL_MAX_QUEUED_TOKENS_BATCH", 20_000_000, { min: 1 }),
      },
    },
    // Beside a bundle (build:services copies a built console there), else the source tree's build.
    consoleDir: resolve(
      r.string("SHOAL_CONSOLE_DIR", firstExisting([resolve(import.meta.dirname, "console"), resolve(import.meta.dirname, "../../console/dist")])),
    ),
    apiKeys,
    tls,
    dispatch: readDispatchConfig(r),
    tei: { embedModel: r.optionalString("SHOAL_TEI_EMBED_MODEL"), rerankModel: r.optionalString("SHOAL_TEI_RERANK_MODEL") },
    batch: readBatchConfig(r),
    embedCache: readEmbedCache(r),
  });
}

function readEmbedCache(r: EnvReader): GatewayConfig["embedCache"] {
  const text = r.optionalString("SHOAL_EMBED_CACHE_BYTES");
  const maxBytes = text === undefined ? DEFAULT_EMBED_CACHE_BYTES : /^0+$/.test(text) ? 0 : parseByteSize(text);
  if (maxBytes === null) r.problem(`SHOAL_EMBED_CACHE_BYTES: expected a size such as 256MiB, a byte count, or 0 to turn the cache off (got '${text}')`);
  return { maxBytes: maxBytes ?? 0, batchDependentModels: r.bool("SHOAL_EMBED_CACHE_QUANTIZED", false) };
}

function readDirectReply(r: EnvReader): GatewayConfig["directReply"] {
  const on = r.bool("SHOAL_DIRECT_REPLY", true);
  const host = r.string("SHOAL_DIRECT_REPLY_HOST", "127.0.0.1");
  const port = r.int("SHOAL_DIRECT_REPLY_PORT", 0, { min: 0, max: 65535 });
  const advertise = r.optionalString("SHOAL_DIRECT_REPLY_ADVERTISE");
  if (advertise !== undefined && !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(advertise)) {
    r.problem(`SHOAL_DIRECT_REPLY_ADVERTISE must be host:port, got ${JSON.stringify(advertise)}`);
  }
  const streams = r.bool("SHOAL_DIRECT_REPLY_STREAMS", true);
  return on ? { host, port, advertise, streams } : undefined;
}

function readFile(r: EnvReader, name: string, path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch (err) {
    r.problem(`${name}=${path}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    return undefined;
  }
}

/** SHOAL_API_KEYS (compact form) and SHOAL_API_KEYS_FILE (YAML or JSON), merged. */
function readApiKeys(r: EnvReader): ApiKeySpec[] {
  const problems: string[] = [];
  const specs: ApiKeySpec[] = [];
  const inline = r.optionalString("SHOAL_API_KEYS");
  if (inline !== undefined) specs.push(...parseApiKeysEnv(inline, problems));
  const path = r.optionalString("SHOAL_API_KEYS_FILE");
  const text = path === undefined ? undefined : readFile(r, "SHOAL_API_KEYS_FILE", path)?.toString("utf8");
  if (path !== undefined && text !== undefined) {
    let doc: unknown;
    try {
      doc = parseConfigText(text);
    } catch (err) {
      problems.push(`SHOAL_API_KEYS_FILE=${path}: not valid YAML or JSON (${(err as Error).message.split("\n")[0] ?? ""})`);
    }
    if (doc !== undefined) specs.push(...parseApiKeysDocument(doc, path, problems));
  }
  checkDuplicateKeys(specs, problems);
  for (const p of problems) r.problem(p);
  return specs;
}

/** SHOAL_TLS_CERT_FILE + SHOAL_TLS_KEY_FILE: both or neither, readable, parseable, a matching pair, in date. */
function readTls(r: EnvReader): GatewayConfig["tls"] {
  const certPath = r.optionalString("SHOAL_TLS_CERT_FILE");
  const keyPath = r.optionalString("SHOAL_TLS_KEY_FILE");
  if (certPath === undefined && keyPath === undefined) return undefined;
  if (certPath === undefined || keyPath === undefined) {
    r.problem("SHOAL_TLS_CERT_FILE and SHOAL_TLS_KEY_FILE: set both (HTTPS) or neither (plain text)");
  }
  const cert = certPath === undefined ? undefined : readFile(r, "SHOAL_TLS_CERT_FILE", certPath);
  const key = keyPath === undefined ? undefined : readFile(r, "SHOAL_TLS_KEY_FILE", keyPath);
  let x509: X509Certificate | undefined;
  let privateKey: KeyObject | undefined;
  if (cert !== undefined) {
    try {
      x509 = new X509Certificate(cert);
    } catch {
      r.problem(`SHOAL_TLS_CERT_FILE=${certPath}: not a PEM certificate`);
    }
  }
  if (key !== undefined) {
    try {
      privateKey = createPrivateKey(key);
    } catch {
      r.problem(`SHOAL_TLS_KEY_FILE=${keyPath}: not an unencrypted PEM private key`);
    }
  }
  if (x509 !== undefined) {
    const now = Date.now();
    if (Date.parse(x509.validTo) < now) r.problem(`SHOAL_TLS_CERT_FILE=${certPath}: certificate expired on ${x509.validTo}`);
    if (Date.parse(x509.validFrom) > now) r.problem(`SHOAL_TLS_CERT_FILE=${certPath}: certificate not valid before ${x509.validFrom}`);
    if (privateKey !== undefined && !x509.checkPrivateKey(privateKey)) {
      r.problem(`SHOAL_TLS_KEY_FILE=${keyPath}: does not match the certificate in SHOAL_TLS_CERT_FILE`);
    }
  }
  return cert !== undefined && key !== undefined ? { cert, key } : undefined;
}
