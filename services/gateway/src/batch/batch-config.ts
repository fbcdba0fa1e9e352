import type { EnvReader } from "@shoal/common";

/** The Batch API's settings (docs/batch.md, "Settings"). */
export interface BatchConfig {
  /**
   * SHOAL_BATCH_TOPIC_PREFIX (default `shoal`): names `<prefix>.batches` (state, compacted),
   * `<prefix>.files` (file chunks) and `<prefix>.batch-work` (runner ownership). Change it only to
   * run several Shoal clusters on one Kafka cluster.
   */
  readonly topicPrefix: string;
  /** SHOAL_BATCH_MAX_FILE_BYTES (default 200 MB, OpenAI's): largest upload. */
  readonly maxFileBytes: number;
  /** SHOAL_BATCH_MAX_REQUESTS (default 50,000, OpenAI's): most requests in one batch's input file. */
  readonly maxRequests: number;
  /** SHOAL_BATCH_MAX_OPEN (default 100): batches not yet final per tenant; past it, creation is a 429. */
  readonly maxOpenPerTenant: number;
  /** SHOAL_BATCH_FILE_RETENTION_MS (default 30 days): how long file chunks are kept (the files topic's retention). */
  readonly fileRetentionMs: number;
  /** SHOAL_BATCH_LINES_IN_FLIGHT (default 32): requests of one batch in flight at once; raise it for a larger pool. */
  readonly linesInFlight: number;
  /** SHOAL_BATCH_CHECKPOINT_MS (default 2000): longest time between checkpoints; work since the last one is redone after a gateway loss. */
  readonly checkpointMs: number;
  /** SHOAL_BATCH_LINE_TIMEOUT_MS (default 120000): deadline of one request's job on the batch lane. */
  readonly lineTimeoutMs: number;
  /** SHOAL_BATCH_LINE_ATTEMPTS (default 5): tries of a request that failed for a passing reason (Unavailable, deadline). */
  readonly lineAttempts: number;
}

/** Bytes of one chunk record on the files topic. */
export const CHUNK_BYTES = 512 * 1024;

/** Reads the SHOAL_BATCH_* settings (problems go to the reader). */
export function readBatchConfig(r: EnvReader): BatchConfig {
  const topicPrefix = r.string("SHOAL_BATCH_TOPIC_PREFIX", "shoal");
  if (!/^[A-Za-z0-9._-]{1,200}$/.test(topicPrefix)) r.problem(`SHOAL_BATCH_TOPIC_PREFIX=${topicPrefix}: letters, digits, '.', '_', '-'`);
  return {
    topicPrefix,
    maxFileBytes: r.int("SHOAL_BATCH_MAX_FILE_BYTES", 200 * 1024 * 1024, { min: 1024 }),
    maxRequests: r.int("SHOAL_BATCH_MAX_REQUESTS", 50_000, { min: 1 }),
    maxOpenPerTenant: r.int("SHOAL_BATCH_MAX_OPEN", 100, { min: 1 }),
    fileRetentionMs: r.int("SHOAL_BATCH_FILE_RETENTION_MS", 30 * 24 * 3_600_000, { min: 60_000 }),
    linesInFlight: r.int("SHOAL_BATCH_LINES_IN_FLIGHT", 32, { min: 1, max: 4_096 }),
    checkpointMs: r.int("SHOAL_BATCH_CHECKPOINT_MS", 2_000, { min: 100 }),
    lineTimeoutMs: r.int("SHOAL_BATCH_LINE_TIMEOUT_MS", 120_000, { min: 1_000 }),
    lineAttempts: r.int("SHOAL_BATCH_LINE_ATTEMPTS", 5, { min: 1, max: 100 }),
  };
}
