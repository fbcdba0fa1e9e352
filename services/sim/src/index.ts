export { benchmarkArms } from "./arms.ts";
export { simulate, WORKER_BATCHING } from "./des.ts";
export type { SimBatching, SimOptions, SimResult } from "./des.ts";
export { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue } from "./policies.ts";
export type { DeviceLoad, DispatchPolicy, LeastLoadedOptions, LoadMetric, Router } from "./policies.ts";
export { findKnees, loneJobMs } from "./sweep.ts";
export type { Knee, PolicySweep, SweepOptions, SweepResult } from "./sweep.ts";
export { CONTRACT_REVIEW_MODELS, generateTrace, zipfCdf } from "./trace.ts";
export type { Trace, TraceJob, TraceModel, TraceOptions } from "./trace.ts";
