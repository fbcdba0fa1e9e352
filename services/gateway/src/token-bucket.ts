/**
 * A token bucket: refills at `perSecond` up to `burst`. A take larger than the whole bucket passes
 * when the bucket is full and leaves it in debt, so one oversized call is slowed, not refused forever.
 */
export class TokenBucket {
  private level: number;
  private last: number;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.level = burst;
    this.last = now();
  }

  /** Takes `n` and returns 0, or takes nothing and returns the milliseconds until it could. */
  take(n = 1): number {
    const now = this.now();
    this.level = Math.min(this.burst, this.level + ((now - this.last) / 1000) * this.perSecond);
    this.last = now;
    const need = Math.min(n, this.burst);
    if (this.level >= need) {
      this.level -= n;
      return 0;
    }
    // Rounded to a microsecond first, so float noise does not add a millisecond.
    return Math.max(1, Math.ceil(Math.round(((need - this.level) / this.perSecond) * 1e6) / 1e3));
  }
}
