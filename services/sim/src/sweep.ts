/**
 * Finds each dispatch policy's knee (issue #16): the highest offered load at which it still
 * answers ≥ 99% of jobs with the p99 latency of agent requests within the SLO, for SLOs of k ×
 * the service time of a lone median request (its calls alone on an idle cluster, one device
 * each). Requests, not single calls: the agent waits for all its calls, and the call mix spans
 * two orders of magnitude (a 1-text query embedding vs a 20-document rerank), so a per-call p99
 * against the median call would be out of reach at any load. Loads are a coarse geometric sweep up to the first failure, then bisection
 * between the last pass and the first failure for each SLO.
 */
import { planSubBatches } from "@shoal/worker/runtime/padding-plan";
import { callCostMs, type CallCost } from "@shoal/worker/runtime/simulated/profile";
import { simulate, WORKER_BATCHING, type SimBatching, type SimResult } from "./des.ts";
import type { DispatchPolicy } from "./policies.ts";
import { percentileSorted } from "./stats.ts";
import { generateTrace, type Trace, type TraceJob, type TraceOptions } from "./trace.ts";

/** Options of {@link findKnees}. */
export interface SweepOptions {
  readonly cost: CallCost;
  readonly devices: number;
  readonly policies: readonly DispatchPolicy[];
  readonly seed: number;
  /** Agent requests per simulated run. */
  readonly requests: number;
  /** SLO = multiple × lone median request service time. */
  readonly sloMultiples: readonly number[];
  /** First offered load (ρ) and the factor between coarse steps. */
  readonly startLoad?: number;
  readonly stepFactor?: number;
  /** Bisection steps per SLO after the coarse sweep. */
  readonly refineSteps?: number;
  /** Highest load tried. */
  readonly maxLoad?: number;
  readonly batching?: SimBatching;
  /** Models a device holds at once (LRU) and the cost of loading another; default: all resident. */
  readonly residentModels?: number;
  readonly loadMs?: number;
  /** Trace shape (Zipf, fan-out, bursts); rates and burst sojourns are set per load. */
  readonly trace?: Partial<Pick<TraceOptions, "zipfS" | "fanOutMin" | "fanOutMax" | "burstFactor">>;
  readonly onProgress?: (line: string) => void;
}

/** One policy's knee for one SLO. */
export interface Knee {
  readonly sloMultiple: number;
  readonly sloMs: number;
  /** Highest passing offered load (ρ); 0 when even the first load fails. */
  readonly load: number;
  /** Jobs answered per second at that load. */
  readonly goodputJobsPerSecond: number;
  readonly result: SimResult | undefined;
}

/** One policy's sweep. */
export interface PolicySweep {
  readonly policy: string;
  readonly knees: readonly Knee[];
  /** Every run, by offered load. */
  readonly runs: ReadonlyMap<number, SimResult>;
}

/** Result of {@link findKnees}. */
export interface SweepResult {
  /** Service time of a lone median agent request on an idle cluster, ms. */
  readonly loneMedianMs: number;
  /** Mean unbatched work per agent request, ms: ρ = rate × this ÷ devices. */
  readonly workPerRequestMs: number;
  readonly policies: readonly PolicySweep[];
}

/** Cost of one job run alone (its items planned into calls as the worker would). */
export function loneJobMs(job: TraceJob, cost: CallCost, batching: SimBatching): number {
  const groups = planSubBatches(job.tokens, { perCallOverheadTokens: batching.perCallOverheadTokens, maxItemsPerCall: batching.maxBatchItems });
  return groups.reduce((ms, g) => ms + callCostMs(cost, g.length, Math.max(...g.map((i) => job.tokens[i]!))), 0);
}

/**
 * The trace at offered load ρ: the same requests, models and lengths at every load, only time
 * scaled (burst sojourns are counted in mean inter-arrival times, so they scale too).
 */
function traceAt(opts: SweepOptions, rate: number): Trace {
  const gapMs = 1000 / rate;
  return generateTrace({ ...opts.trace, seed: opts.seed, requests: opts.requests, requestsPerSecond: rate, calmMeanMs: 300 * gapMs, burstMeanMs: 75 * gapMs });
}

/** Whether a run meets the SLO. */
function passes(r: SimResult, sloMs: number): boolean {
  return r.answeredFraction >= 0.99 && r.latency.request!.p99Ms <= sloMs;
}

/** Sweeps every policy and finds its knee for each SLO. */
export function findKnees(opts: SweepOptions): SweepResult {
  const batching = opts.batching ?? WORKER_BATCHING;
  const startLoad = opts.startLoad ?? 0.02;
  const stepFactor = opts.stepFactor ?? 1.5;
  const refineSteps = opts.refineSteps ?? 4;
  const maxLoad = opts.maxLoad ?? 50;
  const reference = traceAt(opts, 1);
  const loneRequest = new Array<number>(reference.requests).fill(0);
  let work = 0;
  for (const j of reference.jobs) {
    const ms = loneJobMs(j, opts.cost, batching);
    work += ms;
    loneRequest[j.request] = Math.max(loneRequest[j.request]!, ms);
  }
  const loneMedianMs = percentileSorted(
    loneRequest.sort((a, b) => a - b),
    50,
  );
  const workPerRequestMs = work / reference.requests;
  const rateOf = (load: number): number => (load * opts.devices * 1000) / workPerRequestMs;
  const slos = opts.sloMultiples.map((k) => ({ k, ms: k * loneMedianMs }));
  const loosest = Math.max(...slos.map((s) => s.ms));
  const traces = new Map<number, Trace>();
  const traceFor = (load: number): Trace => {
    let t = traces.get(load);
    if (t === undefined) {
      t = traceAt(opts, rateOf(load));
      traces.set(load, t);
    }
    return t;
  };

  // Every policy also runs at the first policy's middle knee, so they can be compared at one load.
  let probeLoad: number | undefined;
  const policies = opts.policies.map((policy): PolicySweep => {
    const runs = new Map<number, SimResult>();
    const runAt = (load: number): SimResult => {
      let r = runs.get(load);
      if (r === undefined) {
        r = simulate({
          trace: traceFor(load),
          devices: opts.devices,
          cost: opts.cost,
          policy,
          batching,
          seed: opts.seed,
          drainMs: 20 * loosest + traceFor(load).durationMs * 0.05,
          ...(opts.residentModels === undefined ? {} : { residentModels: opts.residentModels, loadMs: opts.loadMs ?? 0 }),
        });
        runs.set(load, r);
        opts.onProgress?.(
          `  ${policy.name.padEnd(34)} ρ=${load.toFixed(3).padStart(7)}: answered ${(r.answeredFraction * 100).toFixed(1).padStart(5)}%, ` +
            `request p99 ${fmtMs(r.latency.request!.p99Ms)}, ${r.throughputJobsPerSecond.toFixed(0)} jobs/s, ${r.loads} loads`,
        );
      }
      return r;
    };
    // Coarse: up by stepFactor until the loosest SLO fails.
    let load = startLoad;
    while (load <= maxLoad && passes(runAt(load), loosest)) load *= stepFactor;
    const knees = slos.map(({ k, ms }): Knee => {
      const tried = [...runs.keys()].sort((a, b) => a - b);
      const firstFail = tried.find((l) => !passes(runs.get(l)!, ms));
      let lo = [...tried].reverse().find((l) => (firstFail === undefined || l < firstFail) && passes(runs.get(l)!, ms)) ?? 0;
      let hi = firstFail ?? lo;
      for (let s = 0; s < refineSteps && hi > lo && lo > 0; s++) {
        const mid = Math.sqrt(lo * hi);
        if (passes(runAt(mid), ms)) lo = mid;
        else hi = mid;
      }
      const result = lo > 0 ? runs.get(lo) : undefined;
      return { sloMultiple: k, sloMs: ms, load: lo, goodputJobsPerSecond: result?.throughputJobsPerSecond ?? 0, result };
    });
    probeLoad ??= knees[Math.floor(knees.length / 2)]?.load;
    if (probeLoad !== undefined && probeLoad > 0) runAt(probeLoad);
    return { policy: policy.name, knees, runs };
  });
  return { loneMedianMs, workPerRequestMs, policies };
}

/** ms with sensible precision for both profiles. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "    ∞ ms";
  return `${ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0)} ms`.padStart(8);
}
