import { JobStatus, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { CallCancelledError, DeadlineError } from "./errors.ts";

interface Pending {
  readonly resolve: (result: JobResult) => void;
  readonly reject: (err: unknown) => void;
  readonly timer: NodeJS.Timeout;
  readonly cleanup: () => void;
}

/** What the gateway logs (warn) for a result of a job whose call it answered Unavailable (the chaos checker reads it). */
export const RESULT_AFTER_UNAVAILABLE = "a result came for a job answered Unavailable: it ran, and its caller was told it did not";

/** What became of a result handed to `settle`. */
export type SettleOutcome = "delivered" | "unknown";

/**
 * Calls waiting for their job's result, by job id. A result settles its call once: a duplicate
 * (at-least-once redelivery) or a result whose caller already left finds nothing and is dropped.
 */
export class PendingJobs {
  private readonly calls = new Map<string, Pending>();
  private idleWaiters: Array<() => void> = [];
  /** Jobs answered Unavailable whose record may be written, oldest first (bounded). */
  private readonly gaveUp = new Set<string>();

  /**
   * @param onResultAfterGivingUp called with a result for a job whose call was answered Unavailable
   *   while its record may have been written: the work ran, and its caller was told it did not
   */
  constructor(
    private readonly onResultAfterGivingUp: (jobId: string) => void = () => undefined,
    private readonly maxGivenUp = 10_000,
  ) {}

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

  /** Whether a call still waits for this job's result. */
  waiting(jobId: string): boolean {
    return this.calls.has(jobId);
  }

  /** Hands a result to its waiting call, if any. */
  settle(result: JobResult): SettleOutcome {
    const pending = this.take(result.jobId);
    if (!pending) {
      // Only a computed answer: a cancelled or expired job's result says the cancel worked.
      if (this.gaveUp.delete(result.jobId) && result.status === JobStatus.OK) this.onResultAfterGivingUp(result.jobId);
      return "unknown";
    }
    pending.resolve(result);
    return "delivered";
  }

  /** Rejects one call (its job could not be produced, it timed out, or its caller left). */
  fail(jobId: string, err: unknown): void {
    this.take(jobId)?.reject(err);
  }

  /** Remembers a job answered Unavailable whose record may still be written and run (see the constructor). */
  givenUp(jobId: string): void {
    this.gaveUp.add(jobId);
    if (this.gaveUp.size > this.maxGivenUp) this.gaveUp.delete(this.gaveUp.values().next().value!);
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
