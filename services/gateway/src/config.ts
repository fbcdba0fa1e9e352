import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { EnvReader, readKafkaSettings, type KafkaSettings } from "@shoal/common";

/** The gateway's whole configuration, validated once at start. */
export interface GatewayConfig {
  readonly host: string;
  readonly port: number;
  /** Unique per replica; names the replica's reply topic and consumer group. */
  readonly instanceId: string;
  readonly catalogPath: string;
  readonly kafka: KafkaSettings;
  /** Deadline given to calls that carry none. */
  readonly defaultTimeoutMs: number;
  /** Longest deadline a call may ask for. */
  readonly maxTimeoutMs: number;
  readonly maxInputsPerRequest: number;
  readonly maxInputChars: number;
  readonly maxRequestBytes: number;
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
  const corsOrigins = r.list("SHOAL_CORS_ORIGINS", ["*"]);
  for (const origin of corsOrigins) {
    if (origin !== "*" && !ORIGIN.test(origin)) r.problem(`SHOAL_CORS_ORIGINS: '${origin}' is not '*' or an origin like https://app.example.com:8443`);
  }
  return r.done({
    host: r.string("SHOAL_HOST", "127.0.0.1"),
    port: r.int("SHOAL_PORT", 8080, { min: 0, max: 65535 }),
    instanceId,
    catalogPath: catalogPath ?? "",
    kafka: readKafkaSettings(r, `shoal-gateway-${instanceId}`),
    defaultTimeoutMs,
    maxTimeoutMs,
    maxInputsPerRequest: r.int("SHOAL_MAX_INPUTS", 256, { min: 1 }),
    maxInputChars: r.int("SHOAL_MAX_INPUT_CHARS", 32_768, { min: 1 }),
    maxRequestBytes: r.int("SHOAL_MAX_REQUEST_BYTES", 8 * 1024 * 1024, { min: 1024 }),
    drainGraceMs: r.int("SHOAL_DRAIN_GRACE_MS", 10_000, { min: 0 }),
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
    consoleDir: resolve(r.string("SHOAL_CONSOLE_DIR", resolve(import.meta.dirname, "../../console/dist"))),
  });
}
