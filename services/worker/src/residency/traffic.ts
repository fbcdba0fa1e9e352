/**
 * Exponentially decayed request counts: each request adds 1, and the total halves every
 * `halfLifeMs`. A model with a steady rate of r requests/ms settles at r × halfLifeMs / ln 2.
 */
export class DecayingCount {
  private value = 0;
  private at = 0;

  constructor(private readonly halfLifeMs: number) {
    if (!(halfLifeMs > 0)) throw new RangeError(`halfLifeMs must be > 0 (got ${halfLifeMs})`);
  }

  /** The decayed count at `nowMs` (a clock going backwards counts as no time passing). */
  valueAt(nowMs: number): number {
    if (this.value === 0) return 0;
    const dt = Math.max(0, nowMs - this.at);
    return this.value * 2 ** (-dt / this.halfLifeMs);
  }

  /** Adds `n` requests at `nowMs`. */
  add(nowMs: number, n = 1): void {
    this.value = this.valueAt(nowMs) + n;
    this.at = Math.max(this.at, nowMs);
  }
}
