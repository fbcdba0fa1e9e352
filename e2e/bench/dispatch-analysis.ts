/** Figures of one load point of `npm run bench:dispatch`, and each arm's knee (issue #16). */
import { percentile } from "./workload.ts";

/** One job of the trace as sent: its agent request and when it was due. */
export interface SentJob {
  readonly request: number;
  readonly arrivalMs: number;
}

/** What one arm did at one offered load. */
export interface LoadPoint {
  readonly load: number;
  readonly jobs: number;
  readonly answeredFraction: number;
  /** Agent-request latency (its slowest call), ms; Infinity for a request with an unanswered call. */
  readonly requestP50Ms: number;
  readonly requestP99Ms: number;
  /** Jobs answered per second, from the first arrival to the last answer (as the simulation counts). */
  readonly throughputJobsPerSecond: number;
}

/**
 * @param latenciesMs per job (same order as `jobs`): ms from its due time to its answer, undefined when not answered
 * @param lastAnswerMs ms from the trace's start to the last answer
 */
export function loadPoint(load: number, jobs: readonly SentJob[], latenciesMs: readonly (number | undefined)[], lastAnswerMs: number): LoadPoint {
  const perRequest = new Map<number, number>();
  let answered = 0;
  jobs.forEach((j, i) => {
    const l = latenciesMs[i];
    if (l !== undefined) answered++;
    const prev = perRequest.get(j.request) ?? 0;
    perRequest.set(j.request, l === undefined ? Number.POSITIVE_INFINITY : Math.max(prev, l));
  });
  const req = [...perRequest.values()];
  return {
    load,
    jobs: jobs.length,
    answeredFraction: jobs.length === 0 ? 0 : answered / jobs.length,
    requestP50Ms: percentile(req, 50),
    requestP99Ms: percentile(req, 99),
    throughputJobsPerSecond: lastAnswerMs > 0 ? (answered * 1000) / lastAnswerMs : 0,
  };
}

/** Whether a point meets the SLO: ≥ 99% answered and request p99 within it. */
export const passes = (p: LoadPoint, sloMs: number): boolean => p.answeredFraction >= 0.99 && p.requestP99Ms <= sloMs;

/** The knee: the highest load passing the SLO below the first that fails it (0 when the first fails). */
export function kneeOf(points: readonly LoadPoint[], sloMs: number): { load: number; goodputJobsPerSecond: number } {
  let knee = { load: 0, goodputJobsPerSecond: 0 };
  for (const p of [...points].sort((a, b) => a.load - b.load)) {
    if (!passes(p, sloMs)) break;
    knee = { load: p.load, goodputJobsPerSecond: p.throughputJobsPerSecond };
  }
  return knee;
}

/**
 * The next load to run to narrow a knee down (`--refine`): the midpoint between the knee and the
 * first load above it that fails the SLO, rounded to 0.01. Without a failing point above the knee,
 * the next step up (a quarter past the highest load) while that stays within `ceiling`. Undefined
 * when the bracket is 0.05 wide or less (a finer knee is below a 10 s point's noise), or there is nothing left to try below `ceiling`.
 */
export function nextKneeProbe(points: readonly LoadPoint[], sloMs: number, ceiling: number): number | undefined {
  const sorted = [...points].sort((a, b) => a.load - b.load);
  const knee = kneeOf(sorted, sloMs).load;
  const failing = sorted.find((p) => p.load > knee && !passes(p, sloMs));
  const round = (x: number): number => Math.round(x * 100) / 100;
  if (failing === undefined) {
    const highest = sorted.at(-1)?.load ?? 0;
    const up = round(Math.min(ceiling, highest * 1.25));
    return up > highest ? up : undefined;
  }
  if (failing.load - knee <= 0.05 + 1e-9) return undefined;
  return round((knee + failing.load) / 2);
}
