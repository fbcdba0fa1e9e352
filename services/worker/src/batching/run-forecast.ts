/**
 * When the worker's compute next frees up: each model call in progress, with a predicted end from
 * a learned cost per token-equivalent (padded tokens plus the per-call overhead,
 * `SHOAL_PER_CALL_OVERHEAD_TOKENS`). On an accelerator a call's cost is mostly that overhead, so
 * the prediction is close; on a CPU it follows the padded tokens.
 *
 * The share intake's take-ahead reads it (`SHOAL_TAKE_AHEAD_MS`): a busy worker asks the queue for
 * its next jobs a round trip before its work in hand runs out, so they are in hand when the device frees.
 */
export class RunForecast {
  /** Learned ms per token-equivalent (EWMA); 0 until a call ended. */
  private msPerUnit = 0;
  /** Predicted end (on `now`'s clock) of each call in progress; Infinity while nothing is learned. */
  private readonly running = new Map<number, number>();
  private nextId = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * A call of `units` token-equivalents starts.
   * @returns ends it, and learns from how long it took
   */
  begin(units: number): () => void {
    const id = this.nextId++;
    const startedAt = this.now();
    this.running.set(id, this.msPerUnit > 0 ? startedAt + this.msPerUnit * units : Number.POSITIVE_INFINITY);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.running.delete(id);
      const ms = this.now() - startedAt;
      if (units <= 0 || ms <= 0) return;
      const sample = ms / units;
      this.msPerUnit = this.msPerUnit === 0 ? sample : 0.8 * this.msPerUnit + 0.2 * sample;
    };
  }

  /**
   * Milliseconds until the work in hand is done: the first call in progress ends (`msUntilFree`),
   * then `waitingUnits` token-equivalents more run at the learned cost.
   * @returns undefined until a call ended (nothing learned), or when nothing runs and nothing waits
   */
  msToDrain(waitingUnits: number): number | undefined {
    if (this.msPerUnit === 0) return undefined;
    const call = this.msUntilFree();
    if (call === undefined && waitingUnits <= 0) return undefined;
    return (call ?? 0) + this.msPerUnit * Math.max(0, waitingUnits);
  }

  /**
   * Milliseconds until the first call in progress is predicted to end (0 once it is overdue).
   * @returns undefined when no call is in progress, or none can be predicted yet
   */
  msUntilFree(): number | undefined {
    let soonest = Number.POSITIVE_INFINITY;
    for (const end of this.running.values()) soonest = Math.min(soonest, end);
    if (!Number.isFinite(soonest)) return undefined;
    return Math.max(0, soonest - this.now());
  }
}

/** A call's cost in token-equivalents: each padded group (one model run) is its rows × longest row, plus the per-call overhead. */
export function callUnits(groups: readonly (readonly number[])[], overheadTokens: number): number {
  let units = 0;
  for (const lengths of groups) {
    let longest = 0;
    for (const n of lengths) longest = Math.max(longest, n);
    units += lengths.length * longest + overheadTokens;
  }
  return units;
}
