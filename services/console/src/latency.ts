/** The last `capacity` latencies a page measured, with percentiles over them. */
export class LatencyWindow {
  private readonly values: number[] = [];

  constructor(private readonly capacity = 50) {}

  add(ms: number): void {
    this.values.push(ms);
    if (this.values.length > this.capacity) this.values.shift();
  }

  get count(): number {
    return this.values.length;
  }

  /** Nearest-rank percentile (p in 0..100); undefined when empty. */
  percentile(p: number): number | undefined {
    if (this.values.length === 0) return undefined;
    const sorted = [...this.values].sort((a, b) => a - b);
    const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
    return sorted[rank - 1];
  }

  last(): number | undefined {
    return this.values.at(-1);
  }
}

/** Milliseconds for people: "0.8 ms", "12 ms", "1.4 s". */
export function formatMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  return `${(ms / 1_000).toFixed(1)} s`;
}
