/**
 * Pure pieces of `npm run bench:intake` (e2e/bench/intake.ts): the workload's job classes and
 * their unbatched cost on a simulated device, and the after-the-fact analysis of one arm — from
 * each worker's device runs (SHOAL_SIM_LOG_CALLS), which jobs waited while some worker had
 * nothing running.
 */
import { callCostMs, type CallCost } from "@shoal/worker/runtime/simulated/profile";
import { percentile } from "./workload.ts";

/** Half-open interval [start, end) in unix ms. */
export type Interval = readonly [number, number];

/** One answered job, as the benchmark client saw it. */
export interface AnsweredJob {
  readonly cls: "short" | "long";
  /** Unix ms the trace scheduled it, and when the client actually sent it. */
  readonly scheduledUnixMs: number;
  readonly sentUnixMs: number;
  /** Client send → answer. */
  readonly latencyMs: number;
  /** The `shoal-worker` that answered. */
  readonly worker: string;
  /** timing.queue_ms: gateway enqueue → start of the batch that ran it. */
  readonly queueMs: number;
  /** timing.inference_ms: wall time of the model calls of the (longest) batch that held it. */
  readonly inferenceMs: number;
}

/**
 * When a job waited: from its enqueue, taken as the client's send (the gateway enqueues ≤ ~1 ms
 * later), to the start of the first batch that held it (send + timing.queue_ms).
 */
export function waitInterval(j: AnsweredJob): Interval {
  return [j.sentUnixMs, j.sentUnixMs + j.queueMs];
}

/** Union of intervals, sorted and merged. */
export function merge(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].filter(([s, e]) => e > s).sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [s, e] of sorted) {
    const last = out[out.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else out.push([s, e]);
  }
  return out;
}

/**
 * The times within [from, to) when at least one of the workers had no batch running: the
 * complement of the instants where every worker was busy.
 */
export function someIdle(busy: ReadonlyMap<string, readonly Interval[]>, from: number, to: number): Interval[] {
  const n = busy.size;
  const events: [number, number][] = [];
  for (const iv of busy.values()) for (const [s, e] of iv) events.push([s, +1], [e, -1]);
  // Ends before starts at the same instant: touching intervals leave no gap but count no overlap.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const allBusy: [number, number][] = [];
  let count = 0;
  for (const [t, d] of events) {
    const before = count;
    count += d;
    if (before < n && count === n) allBusy.push([t, Number.POSITIVE_INFINITY]);
    else if (before === n && count < n) allBusy[allBusy.length - 1]![1] = t;
  }
  const idle: Interval[] = [];
  let cursor = from;
  for (const [s, e] of allBusy) {
    if (e <= from || s >= to) continue;
    if (s > cursor) idle.push([cursor, Math.min(s, to)]);
    cursor = Math.max(cursor, e);
  }
  if (cursor < to) idle.push([cursor, to]);
  return idle;
}

/** Length of the overlap of `x` with a sorted, disjoint interval list. */
export function overlapMs(x: Interval, sorted: readonly Interval[]): number {
  // First interval that ends after x starts (binary search), then walk.
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]![1] <= x[0]) lo = mid + 1;
    else hi = mid;
  }
  let total = 0;
  for (let i = lo; i < sorted.length && sorted[i]![0] < x[1]; i++) total += Math.min(x[1], sorted[i]![1]) - Math.max(x[0], sorted[i]![0]);
  return total;
}

/** Figures of one arm over its measured jobs. */
export interface ArmFigures {
  readonly jobs: number;
  readonly shortP50: number;
  readonly shortP99: number;
  readonly longP50: number;
  readonly longP99: number;
  /** Measured jobs answered per second of the window. */
  readonly jobsPerSecond: number;
  /** Measured jobs whose wait overlapped some worker's idle time by ≥ each threshold, as a fraction. */
  readonly waitedBesideIdle: ReadonlyMap<number, number>;
  /** Σ over measured jobs of that overlap ÷ Σ of their waits. */
  readonly idleOverlapShareOfWait: number;
  /** Fraction of the window with at least one worker idle (reconstructed). */
  readonly someIdleFraction: number;
}

/**
 * Figures of one arm: over the jobs scheduled inside the window [from, to), with each worker's
 * device runs (start, end), as its simulated device reported them.
 */
export function armFigures(
  all: readonly AnsweredJob[],
  runs: ReadonlyMap<string, readonly Interval[]>,
  from: number,
  to: number,
  thresholdsMs: readonly number[],
): ArmFigures {
  const measured = all.filter((j) => j.scheduledUnixMs >= from && j.scheduledUnixMs < to);
  const lat = (cls: AnsweredJob["cls"]): number[] => measured.filter((j) => j.cls === cls).map((j) => j.latencyMs);
  const busy = new Map([...runs].map(([w, iv]) => [w, merge(iv)]));
  const horizon = Math.max(to, ...measured.map((j) => waitInterval(j)[1]));
  const idle = someIdle(busy, from - 60_000, horizon + 1);
  const overlaps = measured.map((j) => overlapMs(waitInterval(j), idle));
  const waits = measured.reduce((s, j) => s + j.queueMs, 0);
  const windowIdle = someIdle(busy, from, to).reduce((s, [a, b]) => s + (b - a), 0);
  return {
    jobs: measured.length,
    shortP50: percentile(lat("short"), 50),
    shortP99: percentile(lat("short"), 99),
    longP50: percentile(lat("long"), 50),
    longP99: percentile(lat("long"), 99),
    jobsPerSecond: measured.length / ((to - from) / 1000),
    waitedBesideIdle: new Map(thresholdsMs.map((t) => [t, measured.filter((_, i) => overlaps[i]! >= t).length / Math.max(1, measured.length)])),
    idleOverlapShareOfWait: waits > 0 ? overlaps.reduce((a, b) => a + b, 0) / waits : 0,
    someIdleFraction: windowIdle / (to - from),
  };
}

/** The workload's two job classes: `short` = 1 text of ~16 tokens, `long` = 8 texts of ~200+ tokens. */
export interface JobShape {
  readonly cls: "short" | "long";
  /** Tokens of each text, special tokens included. */
  readonly tokens: readonly number[];
}

/** Unbatched device ms of one job (one call, padded to its longest text), dilation applied. */
export function unbatchedCostMs(profile: CallCost, job: JobShape, dilation: number): number {
  return callCostMs(profile, job.tokens.length, Math.max(...job.tokens)) * dilation;
}
