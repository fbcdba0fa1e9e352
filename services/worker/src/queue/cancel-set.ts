/**
 * Job ids whose callers left, each remembered until its deadline (or `ttlMs` without one), never
 * longer than `maxTtlMs` (a forged far-future deadline expires too), at most `capacity` at once
 * (oldest forgotten first): memory stays bounded whatever arrives.
 */
export class CancelSet {
  private readonly until = new Map<string, number>();

  constructor(
    private readonly capacity: number,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly maxTtlMs = 15 * 60_000,
  ) {}

  add(jobId: string, deadlineUnixMs: number): void {
    const t = this.now();
    const expires = Math.min(deadlineUnixMs > t ? deadlineUnixMs : t + this.ttlMs, t + this.maxTtlMs);
    this.until.delete(jobId);
    this.until.set(jobId, expires);
    while (this.until.size > this.capacity) {
      const oldest = this.until.keys().next().value as string;
      this.until.delete(oldest);
    }
  }

  has(jobId: string): boolean {
    const expires = this.until.get(jobId);
    if (expires === undefined) return false;
    if (expires < this.now()) {
      this.until.delete(jobId);
      return false;
    }
    return true;
  }

  get size(): number {
    return this.until.size;
  }
}
