/**
 * Fits the call-cost model `ms = a + b·B·L + c·B·L²` to timed calls by non-negative least
 * squares. Residuals are relative (weighted by 1/ms): timings span three orders of magnitude
 * (batch 1 × 16 tokens to 32 × 256), and unweighted squares would let the largest calls decide
 * `a` alone, leaving small calls — the latency-critical ones — badly predicted.
 */
import type { CallCost } from "./profile.ts";

/** One timed call shape. */
export interface CostPoint {
  readonly batch: number;
  readonly seqLen: number;
  readonly ms: number;
}

/** Result of {@link fitCallCost}. */
export interface CostFit extends CallCost {
  /** 1 − SS_res / SS_tot on the ms values themselves (unweighted). */
  readonly r2: number;
  /** Largest |predicted − measured| / measured over the points. */
  readonly maxRelativeError: number;
}

function features(p: CostPoint): [number, number, number] {
  const tokens = p.batch * p.seqLen;
  return [1, tokens, tokens * p.seqLen];
}

/** Solves the (weighted) normal equations restricted to the columns in `active`; undefined if singular. */
function solveSubset(points: readonly CostPoint[], active: readonly number[]): number[] | undefined {
  const k = active.length;
  const m = Array.from({ length: k }, () => new Array<number>(k + 1).fill(0));
  for (const p of points) {
    const x = features(p);
    const w = 1 / (p.ms * p.ms);
    for (let i = 0; i < k; i++) {
      for (let j = 0; j < k; j++) m[i]![j]! += w * x[active[i]!]! * x[active[j]!]!;
      m[i]![k]! += w * x[active[i]!]! * p.ms;
    }
  }
  // Gaussian elimination with partial pivoting on a k × (k+1) system, k ≤ 3.
  for (let col = 0; col < k; col++) {
    let pivot = col;
    for (let r = col + 1; r < k; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[pivot]![col]!)) pivot = r;
    if (Math.abs(m[pivot]![col]!) < 1e-300) return undefined;
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    for (let r = 0; r < k; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / m[col]![col]!;
      for (let c = col; c <= k; c++) m[r]![c]! -= f * m[col]![c]!;
    }
  }
  return m.map((row, i) => row[k]! / row[i]!);
}

function weightedError(points: readonly CostPoint[], coef: readonly number[]): number {
  let sum = 0;
  for (const p of points) {
    const x = features(p);
    const pred = coef[0]! * x[0] + coef[1]! * x[1] + coef[2]! * x[2];
    sum += ((pred - p.ms) / p.ms) ** 2;
  }
  return sum;
}

/**
 * Non-negative weighted least squares over the three coefficients. With three unknowns the
 * exact solution is found by trying every set of free coefficients (the others held at 0) and
 * keeping the best feasible one — simpler and more obviously right than an iterative NNLS.
 * @throws RangeError with fewer than one point or a point whose ms is not positive
 */
export function fitCallCost(points: readonly CostPoint[]): CostFit {
  if (points.length === 0) throw new RangeError("no points to fit");
  for (const p of points) if (!(p.ms > 0 && p.batch > 0 && p.seqLen > 0)) throw new RangeError(`bad point ${JSON.stringify(p)}`);
  let best: number[] = [0, 0, 0];
  let bestErr = weightedError(points, best);
  for (let mask = 1; mask < 8; mask++) {
    const active = [0, 1, 2].filter((i) => (mask >> i) & 1);
    const sol = solveSubset(points, active);
    if (sol === undefined || sol.some((v) => !(v >= 0))) continue;
    const coef = [0, 0, 0];
    active.forEach((col, i) => {
      coef[col] = sol[i]!;
    });
    const err = weightedError(points, coef);
    if (err < bestErr) {
      bestErr = err;
      best = coef;
    }
  }
  const [aMs, bMsPerToken, cMsPerToken2] = best as [number, number, number];
  const mean = points.reduce((s, p) => s + p.ms, 0) / points.length;
  let ssRes = 0;
  let ssTot = 0;
  let maxRelativeError = 0;
  for (const p of points) {
    const pred = aMs + bMsPerToken * p.batch * p.seqLen + cMsPerToken2 * p.batch * p.seqLen * p.seqLen;
    ssRes += (pred - p.ms) ** 2;
    ssTot += (p.ms - mean) ** 2;
    maxRelativeError = Math.max(maxRelativeError, Math.abs(pred - p.ms) / p.ms);
  }
  return { aMs, bMsPerToken, cMsPerToken2, r2: ssTot === 0 ? 1 : 1 - ssRes / ssTot, maxRelativeError };
}
