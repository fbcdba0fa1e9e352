import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { CallCancelledError, DeadlineError } from "./errors.ts";

interface Pending {
  readonly resolve: (result: JobResult) => void;
  readonly reject: (err: unknown) => void;
  readonly timer: NodeJS.Timeout;
  readonly cleanup: () => void;
}

/** What became of a result handed to `settle`. */
export type SettleOutcome = "delivered" | "unknown";

/**
 * Calls waiting for their job's result, by job id. A result settles its call once: a duplicate
 * (at-least-once redelivery) or a result whose caller already left finds nothing and is dropped.
 */
export class PendingJobs {
  private readonly calls = new Map<string, Pending>();
  private idleWaiters: Array<() => void> = [];

  get size(): number {
    return this.calls.size;
  }

  /**
   * Registers a call before its job is produced, so that even an instant result finds it.
   * The promise rejects with DeadlineError at `deadlineUnixMs`, or with the signal's reason
   * when the caller goes away.
   */
  register(jobId: string, deadlineUnixMs: number, signal: AbortSignal, now = Date.now()): Promise<JobResult> {
    return new Promise<JobResult>((resolve, reject) => {
      const timeoutMs = Math.max(0, deadlineUnixMs - now);
      const onAbort = (): void => this.fail(jobId, signal.reason ?? new CallCancelledError("call cancelled"));
      const timer = setTimeout(() => this.fail(jobId, new DeadlineError(timeoutMs)), timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      };
      this.calls.set(jobId, { resolve, reject, timer, cleanup });
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Hands a result to its waiting call, if any. */
  settle(result: JobResult): SettleOutcome {
    const pending = this.take(result.jobId);
    if (!pending) return "unknown";
    pending.resolve(result);
    return "delivered";
  }

  /** Rejects one call (its job could not be produced, it timed out, or its caller left). */
  fail(jobId: string, err: unknown): void {
    this.take(jobId)?.reject(err);
  }

  /** Resolves once no call is pending, or after `timeoutMs`; returns whether it drained. */
  async drained(timeoutMs: number): Promise<boolean> {
    if (this.calls.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)));
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    try {
      return await Promise.race([idle, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private take(jobId: string): Pending | undefined {
    const pending = this.calls.get(jobId);
    if (!pending) return undefined;
    this.calls.delete(jobId);
    pending.cleanup();
    if (this.calls.size === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
    return pending;
  }
}
