import { Code, ConnectError } from "@connectrpc/connect";

/** How a call is retried on Unavailable and ResourceExhausted. */
export interface RetryPolicy {
  /** Attempts in all, the first included (1 = no retries). */
  readonly maxAttempts: number;
  /** Upper bound of the first backoff; each later one grows by `multiplier`, up to `maxBackoffMs`. */
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly multiplier: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 4,
  initialBackoffMs: 100,
  maxBackoffMs: 5_000,
  multiplier: 2,
});

/** What `onRetry` is told before the client waits and tries again. */
export interface RetryInfo {
  /** The attempt that failed, from 1. */
  readonly attempt: number;
  /** How long the client waits before the next attempt. */
  readonly delayMs: number;
  /** The server's hint (`retry-after-ms`, or `retry-after` in seconds), when it sent one. */
  readonly retryAfterMs: number | undefined;
  readonly error: ConnectError;
}

const RETRIABLE = new Set([Code.Unavailable, Code.ResourceExhausted]);

/** Whether an error is worth another attempt: the server was busy or unreachable. */
export function isRetriable(err: ConnectError): boolean {
  return RETRIABLE.has(err.code);
}

/**
 * The server's retry hint from response headers or trailers (both land in `metadata`):
 * `retry-after-ms` (milliseconds, as OpenAI and Shoal send it), else the standard
 * `retry-after` (delay-seconds or an HTTP date).
 */
export function retryAfterMs(err: ConnectError, now = Date.now()): number | undefined {
  const ms = err.metadata.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "" && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const after = err.metadata.get("retry-after");
  if (after === null || after.trim() === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(after.trim())) return Number(after) * 1_000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Delay before the attempt after `failedAttempt`: the server's hint when present (plus up to 10%
 * so that a crowd of clients told the same time does not return at once), else exponential
 * backoff with full jitter.
 */
export function backoffMs(policy: RetryPolicy, failedAttempt: number, hintMs: number | undefined, random: () => number = Math.random): number {
  if (hintMs !== undefined) return hintMs + random() * hintMs * 0.1;
  const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (failedAttempt - 1));
  return random() * ceiling;
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(ConnectError.from(signal.reason));
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(ConnectError.from(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export interface RetryOptions {
  readonly policy: RetryPolicy;
  /** Absolute deadline (epoch ms) over all attempts and waits. */
  readonly deadline: number;
  readonly signal?: AbortSignal;
  readonly onRetry?: (info: RetryInfo) => void;
}

/**
 * A Canceled the caller did not ask for is the server going away mid-call: a gateway killed or
 * restarted resets its HTTP/2 streams with CANCEL, which connect-node reports as Canceled. To the
 * caller that gateway is unavailable, and another attempt (on a gateway that is up) may succeed:
 * Unavailable. A call whose own signal was aborted stays Canceled.
 */
export function unlessCallerCancelled(err: ConnectError, signal: AbortSignal | undefined): ConnectError {
  if (err.code !== Code.Canceled || signal?.aborted === true) return err;
  return new ConnectError(`the server ended the call (${err.rawMessage})`, Code.Unavailable, err.metadata, undefined, err);
}

/**
 * Runs `attempt(timeoutMs)` until it succeeds, fails with a code that is not retriable, runs out
 * of attempts, or would wait past the deadline; each attempt gets the time left as its timeout.
 * The last error is thrown as is.
 */
export async function withRetries<T>(opts: RetryOptions, attempt: (timeoutMs: number) => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    const left = opts.deadline - Date.now();
    if (left <= 0) throw new ConnectError(`deadline exceeded after ${n - 1} attempts`, Code.DeadlineExceeded);
    try {
      return await attempt(left);
    } catch (e) {
      const err = unlessCallerCancelled(ConnectError.from(e), opts.signal);
      if (!isRetriable(err) || n >= opts.policy.maxAttempts || opts.signal?.aborted) throw err;
      const hint = retryAfterMs(err);
      const delayMs = backoffMs(opts.policy, n, hint);
      if (Date.now() + delayMs >= opts.deadline) throw err;
      opts.onRetry?.({ attempt: n, delayMs, retryAfterMs: hint, error: err });
      await sleep(delayMs, opts.signal);
    }
  }
}
