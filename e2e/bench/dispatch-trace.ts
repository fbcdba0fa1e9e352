import { generateTrace, loneJobMs, WORKER_BATCHING, type SimBatching, type Trace } from "@shoal/sim";
import type { CallCost, SimProfile } from "@shoal/worker/runtime/simulated/profile";
import { percentile } from "./workload.ts";

/** The agent trace of `bench:dispatch` and `bench:dispatch-orders`. */
export interface BenchTraceOptions {
  readonly seed: number;
  readonly zipfS: number;
  readonly burstFactor: number;
  /** 9 (the agent's nine) or 1 (every call to one model: the ablation). */
  readonly models: number;
}

/** The trace at a rate: the same requests at every load, only time scaled (as services/sim's sweep builds it). */
export function benchTraceAt(o: BenchTraceOptions, requestsPerSecond: number, requests: number): Trace {
  const gapMs = 1000 / requestsPerSecond;
  const trace = generateTrace({
    seed: o.seed,
    requests,
    requestsPerSecond,
    zipfS: o.zipfS,
    burstFactor: o.burstFactor,
    calmMeanMs: 300 * gapMs,
    burstMeanMs: 75 * gapMs,
  });
  return o.models === 1 ? { ...trace, models: [trace.models[0]!], jobs: trace.jobs.map((j) => ({ ...j, model: 0 })) } : trace;
}

/** What loads and SLOs are measured in, from 2,000 requests of the trace run alone on the devices. */
export interface BenchScale {
  /** The trace at 1 request/s (its models, the lone requests). */
  readonly reference: Trace;
  /** Median lone agent request (its slowest call alone on a device), ms: the SLOs' unit. */
  readonly loneMedianMs: number;
  /** Requests per second at load ρ: ρ × devices of unbatched device time. */
  readonly rateAt: (load: number) => number;
}

export function benchScale(o: BenchTraceOptions, cost: CallCost, batching: SimBatching, devices: number): BenchScale {
  const reference = benchTraceAt(o, 1, 2_000);
  const loneRequest = new Array<number>(reference.requests).fill(0);
  let work = 0;
  for (const j of reference.jobs) {
    const ms = loneJobMs(j, cost, batching);
    work += ms;
    loneRequest[j.request] = Math.max(loneRequest[j.request]!, ms);
  }
  const workPerRequestMs = work / reference.requests;
  return { reference, loneMedianMs: percentile(loneRequest, 50), rateAt: (load) => (load * devices * 1000) / workPerRequestMs };
}

/**
 * A profile's devices as the benches run them: every cost stretched by the dilation, and the
 * worker's batching tuned for the hardware (its per-call overhead in tokens is the profile's a ÷ b).
 */
export function benchDevice(profile: SimProfile, dilation: number): { cost: CallCost; batching: SimBatching } {
  return {
    cost: { aMs: profile.aMs * dilation, bMsPerToken: profile.bMsPerToken * dilation, cMsPerToken2: profile.cMsPerToken2 * dilation },
    batching: { ...WORKER_BATCHING, perCallOverheadTokens: Math.round(profile.aMs / Math.max(profile.bMsPerToken, 1e-9)) },
  };
}
