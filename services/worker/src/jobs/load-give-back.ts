/**
 * What a worker does with a job whose model it cannot load: the load failed just now, or failed
 * before and waits out its backoff (residency/load-backoff.ts). Another worker may well load it
 * (the files are corrupted on this host's disk, this worker is short of memory), so the job is
 * failed `Unavailable` only when no other worker can be given it:
 *
 * - `decline`: given back to the share group, and its topic not asked again for a while
 *   (Settlement `decline`), so another worker takes it rather than this one straight back;
 * - `retry`: its last delivery that may still run (the next one is dead-lettered unrun, see
 *   JobLifecycleDeps.maxDeliveries; after the limit the broker archives it, answered by nobody):
 *   written to the retry topic as its next attempt, a record with deliveries of its own;
 * - `fail`: answered `Unavailable` — a queue that does not redeliver at once (a consumer group,
 *   routed records), or the job's last delivery and attempt (or its last delivery while the worker
 *   drains: from then on a job is answered rather than sent round the retry topic).
 */
export type LoadGiveBack = "decline" | "retry" | "fail";

export interface LoadGiveBackFacts {
  /** Whether a job given back is offered to other workers at once (a share group). */
  readonly releaseRedelivers: boolean;
  /** Times the broker has handed this record out, this one included. */
  readonly deliveryCount: number;
  /** Deliveries after which a job is dead-lettered instead of run; undefined: no limit. */
  readonly maxDeliveries: number | undefined;
  /** Whether the retry topic takes the job's next attempt (RetryRouter.retriable). */
  readonly retriable: boolean;
  /** The worker is draining (JobLifecycle.drain). */
  readonly draining: boolean;
}

/** Decides how a job whose model cannot load here leaves this worker. */
export function loadGiveBack(f: LoadGiveBackFacts): LoadGiveBack {
  if (!f.releaseRedelivers) return "fail";
  // Given back now, the job's next delivery would be its last: dead-lettered unrun wherever it lands.
  const lastChance = f.maxDeliveries !== undefined && f.deliveryCount + 1 >= f.maxDeliveries;
  if (!lastChance) return "decline";
  return f.retriable && !f.draining ? "retry" : "fail";
}
