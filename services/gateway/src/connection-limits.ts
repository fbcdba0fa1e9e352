import type { StreamResetLimits } from "./stream-reset-guard.ts";

/** Limits against slow and greedy peers, applied by both server shapes (plain dual-protocol and TLS). */
export interface ConnectionLimits extends StreamResetLimits {
  /** Open TCP connections; more are refused at accept. */
  readonly maxConnections: number;
  /** HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreams: number;
  /** An HTTP/2 session or HTTP/1.1 keep-alive connection with no traffic for this long is closed. */
  readonly idleTimeoutMs: number;
  /** HTTP/1.1: all request headers must arrive within this time (slowloris). */
  readonly headersTimeoutMs: number;
  /** HTTP/1.1: the whole request (headers and body) must arrive within this time. */
  readonly requestTimeoutMs: number;
  /** Plain-text port: a connection that has not sent enough to tell HTTP/1.1 from h2c within this time is closed. */
  readonly sniffTimeoutMs: number;
}

/** Defaults; each is configurable (config.ts, README's configuration table). */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  maxConnections: 4_096,
  maxConcurrentStreams: 128,
  idleTimeoutMs: 120_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  sniffTimeoutMs: 5_000,
  streamResetBurst: 200,
  streamResetsPerSecond: 20,
};
