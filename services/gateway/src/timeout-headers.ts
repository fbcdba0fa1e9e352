import type { IncomingHttpHeaders } from "node:http";

/** Longest delay a Node timer holds; Connect-ES arms one per call with the caller's timeout. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const GRPC_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/**
 * Lowers a `grpc-timeout` or `connect-timeout-ms` beyond what a Node timer can hold (e.g.
 * `99999999H`) to the longest one that fits. Connect-ES arms its deadline timer before checking
 * the value, and Node turns an oversized delay into 1 ms (with a process warning), so such a call
 * would time out at once. Nothing is lost: SHOAL_MAX_TIMEOUT_MS caps every call's wait anyway.
 */
export function clampTimeoutHeaders(headers: IncomingHttpHeaders): void {
  const grpc = headers["grpc-timeout"];
  if (typeof grpc === "string") {
    const m = /^(\d{1,8})([HMSmun])$/.exec(grpc);
    if (m && Number(m[1]) * (GRPC_UNIT_MS[m[2]!] ?? 0) > MAX_TIMER_MS) headers["grpc-timeout"] = "99999999m";
  }
  const connect = headers["connect-timeout-ms"];
  if (typeof connect === "string" && /^\d{1,10}$/.test(connect) && Number(connect) > MAX_TIMER_MS) headers["connect-timeout-ms"] = String(MAX_TIMER_MS);
}
