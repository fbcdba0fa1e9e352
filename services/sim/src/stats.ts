/** Latency summaries of a simulation run. */

/** Latency figures of one class of jobs, ms; unanswered jobs count as infinitely late. */
export interface LatencySummary {
  readonly count: number;
  readonly answered: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
}

/** Nearest-rank percentile of ascending-sorted samples (NaN when empty). */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Summarises latencies (Infinity = not answered); the mean is over answered ones. */
export function summarise(latencies: readonly number[]): LatencySummary {
  const sorted = Float64Array.from(latencies).sort();
  let answered = 0;
  let sum = 0;
  for (const l of sorted) {
    if (Number.isFinite(l)) {
      answered += 1;
      sum += l;
    }
  }
  return {
    count: sorted.length,
    answered,
    p50Ms: percentileSorted(sorted, 50),
    p99Ms: percentileSorted(sorted, 99),
    meanMs: answered === 0 ? Number.NaN : sum / answered,
  };
}
