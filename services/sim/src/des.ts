/**
 * Discrete-event simulation of N simulated accelerators serving a trace under one dispatch
 * policy (issue #16). Devices cost what the simulated runtime costs (`a + b·B·L + c·B·L²` per
 * call, profile.ts), run one batch at a time, and batch by the worker's rules: whole jobs of one
 * model up to the token budget and item cap, a max wait unless full, then the worker's own
 * padding plan (planSubBatches) splits the batch into calls. The only difference between
 * policies is where jobs wait: one shared queue pulled by idle devices, or a private queue per
 * device filled by a router. Virtual time, no randomness but the seeded router's: deterministic.
 */
import { callCostMs, type CallCost } from "@shoal/worker/runtime/simulated/profile";
import { planSubBatches } from "@shoal/worker/runtime/padding-plan";
import { mulberry32 } from "@shoal/models";
import { EventHeap } from "./event-heap.ts";
import { JobQueue, type BatchLimits } from "./job-queue.ts";
import type { DeviceLoad, DispatchPolicy, Router } from "./policies.ts";
import { summarise, type LatencySummary } from "./stats.ts";
import type { Trace, TraceJob } from "./trace.ts";

/** The worker's batching settings the devices apply (SHOAL_BATCH_* and SHOAL_PER_CALL_OVERHEAD_TOKENS). */
export interface SimBatching extends BatchLimits {
  /** Longest the oldest job waits for company while its batch is not full (0: none). */
  readonly maxWaitMs: number;
  /** Padding planner's per-call cost, token-equivalents. */
  readonly perCallOverheadTokens: number;
}

/** The worker's defaults (services/worker/src/config.ts). */
export const WORKER_BATCHING: SimBatching = { maxBatchTokens: 2048, maxBatchItems: 128, maxWaitMs: 0, perCallOverheadTokens: 64 };

/** Options of {@link simulate}. */
export interface SimOptions {
  readonly trace: Trace;
  readonly devices: number;
  readonly cost: CallCost;
  readonly policy: DispatchPolicy;
  readonly batching?: SimBatching;
  /** Seeds the routers' random choices. */
  readonly seed?: number;
  /** How long after the last arrival jobs may still finish, ms (default 10% of the trace, at least 1 s). */
  readonly drainMs?: number;
  /** Models a device holds at once (LRU); default: all, loaded before the run. */
  readonly residentModels?: number;
  /** Cost of loading a model that is not resident, ms. */
  readonly loadMs?: number;
  /**
   * Fixed path latency added to every answer, ms (default 0): what a live cluster spends outside
   * the device on a lone job — gateway, Kafka produce and fetch, reply — measured, not fitted.
   */
  readonly pathMs?: number;
  /**
   * Routed policies: how often each device publishes its load, ms (default 0: routers read the
   * devices' true load). A live router's board is only as fresh as the workers' status messages
   * (SHOAL_STATUS_INTERVAL_MS): with this set, each device publishes every statusMs, their phases
   * spread evenly, and a router reads the last published loads.
   */
  readonly statusMs?: number;
}

/** What a run measured. */
export interface SimResult {
  readonly policy: string;
  readonly jobs: number;
  /** Jobs offered per second over the trace's arrival window. */
  readonly offeredJobsPerSecond: number;
  /** Jobs answered per second, from 0 to the last answer. */
  readonly throughputJobsPerSecond: number;
  readonly usefulTokensPerSecond: number;
  readonly answeredFraction: number;
  /** Per model id, `all` jobs, and `request` (an agent request: its slowest call). */
  readonly latency: Readonly<Record<string, LatencySummary>>;
  /** Share of [0, end] each device spent computing or loading. */
  readonly busyFraction: readonly number[];
  /** Useful tokens / padded tokens computed. */
  readonly usefulTokenFraction: number;
  /** Jobs that waited at a moment when some device was idle. */
  readonly jobsWaitedWhileIdle: number;
  readonly loads: number;
  readonly batches: number;
  /** ms from 0 to the last answer (or the drain horizon). */
  readonly endMs: number;
  /** Latency of each job by id, ms; Infinity when not answered by the horizon. */
  readonly latenciesMs: Float64Array;
}

interface Device {
  readonly index: number;
  readonly queue: JobQueue;
  busy: boolean;
  runningJobs: number;
  runningTokens: number;
  busyMs: number;
  /** Time of a pending max-wait wake-up (undefined: none). */
  wakeAt: number | undefined;
  /** Resident models, least recently used first. */
  readonly resident: number[];
  /** A rotating shared queue: where this device's next round over the models starts. */
  next: number;
  /** Jobs of the take running now, until its last batch ends (a `heads` order counts them as not yet acknowledged). */
  running: TraceJob[];
}

type SimEvent =
  | { readonly type: "done"; readonly device: Device }
  | { readonly type: "wake"; readonly device: Device }
  | { readonly type: "status"; readonly device: Device }
  | { readonly type: "refresh" };

/** Runs the trace through the devices under the policy. */
export function simulate(opts: SimOptions): SimResult {
  const { trace, cost } = opts;
  const batching = opts.batching ?? WORKER_BATCHING;
  const n = opts.devices;
  if (!(Number.isSafeInteger(n) && n >= 1)) throw new RangeError(`devices must be an integer >= 1 (got ${n})`);
  const residentCap = opts.residentModels ?? trace.models.length;
  const loadMs = opts.loadMs ?? 0;
  const pathMs = opts.pathMs ?? 0;
  if (!(pathMs >= 0)) throw new RangeError(`pathMs must be >= 0 (got ${pathMs})`);
  const statusMs = opts.statusMs ?? 0;
  if (!(statusMs >= 0)) throw new RangeError(`statusMs must be >= 0 (got ${statusMs})`);
  const horizon = trace.durationMs + (opts.drainMs ?? Math.max(1_000, trace.durationMs * 0.1));
  const jobs = trace.jobs;

  const devices: Device[] = Array.from({ length: n }, (_, index) => ({
    index,
    queue: new JobQueue(),
    busy: false,
    runningJobs: 0,
    runningTokens: 0,
    busyMs: 0,
    wakeAt: undefined,
    // Warm start: the first models that fit are resident everywhere.
    resident: Array.from({ length: Math.min(residentCap, trace.models.length) }, (_, m) => m),
    // Devices start their rounds at different models (as workers do).
    next: Math.floor((index * trace.models.length) / n),
    running: [],
  }));
  const shared = opts.policy.kind === "shared" ? new JobQueue() : undefined;
  const router: Router | undefined = opts.policy.kind === "routed" ? opts.policy.createRouter(n, mulberry32(opts.seed ?? 1)) : undefined;
  const heap = new EventHeap<SimEvent>();
  const doneAt = new Float64Array(jobs.length).fill(Infinity);
  const waitedWhileIdle = new Uint8Array(jobs.length);
  /** Idle devices, longest idle first: the shared queue hands work to them in that order. */
  const idle: Device[] = [...devices];
  /** Times at which a device went idle while jobs waited somewhere. */
  const idleWhileWaiting: number[] = [];
  let queued = 0;
  let usefulTokens = 0;
  let paddedTokens = 0;
  let loads = 0;
  let batches = 0;
  let lastDone = 0;

  const loadOf = (d: Device): DeviceLoad => ({
    queuedJobs: d.queue.jobs,
    queuedTokens: d.queue.tokens,
    runningJobs: d.runningJobs,
    runningTokens: d.runningTokens,
  });
  /** What each device last published (statusMs > 0); idle before its first message. */
  const published: DeviceLoad[] = devices.map(() => ({ queuedJobs: 0, queuedTokens: 0, runningJobs: 0, runningTokens: 0, asOfMs: 0 }));
  /** The load a router sees: the devices' own, or what they last published. */
  const loadsView = (): DeviceLoad[] => (statusMs > 0 ? published.slice() : devices.map(loadOf));

  /** Whether a device went idle while jobs waited, after `arrival` and at or before `now`. */
  function idleEventBetween(arrival: number, now: number): boolean {
    let lo = 0;
    let hi = idleWhileWaiting.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (idleWhileWaiting[mid]! <= arrival) lo = mid + 1;
      else hi = mid;
    }
    return lo < idleWhileWaiting.length && idleWhileWaiting[lo]! <= now;
  }

  /** A rotating shared queue: the first model with jobs from the device's round's start, which moves past it. */
  function rotationPick(d: Device, q: JobQueue): number | undefined {
    const models = q.models;
    for (let k = 0; k < models; k++) {
      const m = (d.next + k) % models;
      if (q.waiting(m) > 0) {
        d.next = (m + 1) % models;
        return m;
      }
    }
    return undefined;
  }

  /**
   * A `heads` order: the model with jobs waiting whose oldest job not yet acknowledged (waiting, or
   * running on any device) arrived first; ties go to the first in the device's round.
   */
  function headsPick(d: Device, q: JobQueue): number | undefined {
    const models = q.models;
    const head = Array.from({ length: models }, (_, m) => q.headArrivalMs(m));
    for (const x of devices) for (const job of x.running) head[job.model] = Math.min(head[job.model]!, job.arrivalMs);
    let best: number | undefined;
    for (let k = 0; k < models; k++) {
      const m = (d.next + k) % models;
      if (q.waiting(m) > 0 && (best === undefined || head[m]! < head[best]!)) best = m;
    }
    if (best !== undefined) d.next = (best + 1) % models;
    return best;
  }

  /**
   * Starts the device's next batch if it is idle and has work that should start now; `continuing`:
   * it just finished one (a rotating shared queue then takes the next model in its round).
   */
  function tryStart(d: Device, now: number, continuing = false): boolean {
    if (d.busy) return false;
    const q = shared ?? d.queue;
    if (q.jobs === 0) return false;
    if (batching.maxWaitMs > 0 && !q.wouldFill(batching)) {
      const due = q.oldestArrivalMs() + batching.maxWaitMs;
      if (due > now) {
        if (d.wakeAt === undefined || d.wakeAt > due) {
          d.wakeAt = due;
          heap.push(due, { type: "wake", device: d });
        }
        return false;
      }
    }
    const mixed = opts.policy.kind === "shared" ? opts.policy.mixedTakeTokens : undefined;
    if (mixed === undefined) {
      const order = continuing && opts.policy.kind === "shared" ? opts.policy.order : undefined;
      const first = q.take(batching, order === "rotation" ? rotationPick(d, q) : order === "heads" ? headsPick(d, q) : undefined);
      const batches = [first];
      // A take of several batches: more of the same model's jobs, run back to back.
      const takeBatches = opts.policy.kind === "shared" ? (opts.policy.takeBatches ?? 1) : 1;
      for (let k = 1; k < takeBatches && first.length > 0; k++) {
        const more = q.take(batching, first[0]!.model);
        if (more.length === 0) break;
        batches.push(more);
      }
      queued -= batches.reduce((sum, b) => sum + b.length, 0);
      run(d, batches, now);
      return true;
    }
    // A mixed fetch: the oldest jobs of any model, then one batch per model, one after another.
    const taken = q.takeOldest(mixed);
    queued -= taken.length;
    const byModel = new Map<number, TraceJob[]>();
    for (const job of taken) byModel.set(job.model, [...(byModel.get(job.model) ?? []), job]);
    run(d, [...byModel.values()], now);
    return true;
  }

  /** Runs the batches back to back on the device, each its model's calls. */
  function run(d: Device, batchList: TraceJob[][], now: number): void {
    let t = now;
    for (const batch of batchList) t = runBatch(d, batch, now, t);
    d.running = batchList.flat();
    d.busy = true;
    d.runningJobs = batchList.reduce((n, b) => n + b.length, 0);
    d.runningTokens = batchList.reduce((n, b) => n + b.reduce((s, j) => s + j.totalTokens, 0), 0);
    d.busyMs += Math.min(t, horizon) - Math.min(now, horizon);
    const i = idle.indexOf(d);
    if (i >= 0) idle.splice(i, 1);
    heap.push(t, { type: "done", device: d });
  }

  /** One model's batch from `start`; returns when its last call ends. */
  function runBatch(d: Device, batch: TraceJob[], now: number, start: number): number {
    const model = batch[0]!.model;
    let t = start;
    const at = d.resident.indexOf(model);
    if (at >= 0) d.resident.splice(at, 1);
    else {
      loads += 1;
      t += loadMs;
      if (d.resident.length >= residentCap) d.resident.shift();
    }
    d.resident.push(model);
    // The worker's padding plan over every item of the batch; each group is one call.
    const lengths: number[] = [];
    const owner: number[] = [];
    batch.forEach((job, j) => {
      for (const len of job.tokens) {
        lengths.push(len);
        owner.push(j);
      }
    });
    const groups = planSubBatches(lengths, { perCallOverheadTokens: batching.perCallOverheadTokens, maxItemsPerCall: batching.maxBatchItems });
    const finished = new Array<number>(batch.length).fill(start);
    for (const g of groups) {
      let longest = 0;
      for (const i of g) longest = Math.max(longest, lengths[i]!);
      t += callCostMs(cost, g.length, longest);
      paddedTokens += g.length * longest;
      for (const i of g) {
        usefulTokens += lengths[i]!;
        finished[owner[i]!] = t;
      }
    }
    batch.forEach((job, j) => {
      doneAt[job.id] = finished[j]!;
      if (idleEventBetween(job.arrivalMs, now)) waitedWhileIdle[job.id] = 1;
    });
    batches += 1;
    return t;
  }

  function arrive(job: TraceJob): void {
    const now = job.arrivalMs;
    queued += 1;
    if (shared !== undefined) {
      shared.push(job);
      for (const d of [...idle]) {
        if (shared.jobs === 0) break;
        tryStart(d, now);
      }
    } else {
      // A board read before every job (R = 0, as the gateway's SHOAL_DISPATCH_REFRESH_MS=0 does).
      if (router!.refreshMs === 0) router!.refresh?.(loadsView());
      const d = devices[router!.route(job, loadsView())]!;
      d.queue.push(job);
      tryStart(d, now);
    }
    // Still waiting while a device has nothing to do: the cost of pushing work blind.
    if (doneAt[job.id] === Infinity && idle.length > 0) waitedWhileIdle[job.id] = 1;
  }

  function handle(time: number, e: SimEvent): void {
    if (e.type === "status") {
      published[e.device.index] = { ...loadOf(e.device), asOfMs: time };
      const next = time + statusMs;
      if (next <= trace.durationMs) heap.push(next, e);
      return;
    }
    if (e.type === "refresh") {
      router!.refresh!(loadsView());
      const next = time + router!.refreshMs!;
      if (next <= trace.durationMs) heap.push(next, e);
      return;
    }
    const d = e.device;
    if (e.type === "wake") {
      if (d.wakeAt !== time) return; // superseded
      d.wakeAt = undefined;
      tryStart(d, time);
      return;
    }
    d.busy = false;
    d.running = [];
    d.runningJobs = 0;
    d.runningTokens = 0;
    lastDone = Math.max(lastDone, time);
    if (!tryStart(d, time, true)) {
      idle.push(d);
      if (queued > 0) idleWhileWaiting.push(time);
    }
  }

  if (router !== undefined && statusMs > 0) for (const d of devices) heap.push((statusMs * d.index) / n, { type: "status", device: d });
  if (router?.refreshMs !== undefined && router.refreshMs > 0 && router.refresh !== undefined) heap.push(0, { type: "refresh" });
  let next = 0;
  for (;;) {
    const eventAt = heap.peekTime();
    const arrivalAt = jobs[next]?.arrivalMs ?? Infinity;
    // Device completions and board refreshes at an instant come before arrivals at it.
    if (arrivalAt < eventAt) {
      arrive(jobs[next++]!);
      continue;
    }
    if (eventAt === Infinity || eventAt > horizon) break;
    const top = heap.pop()!;
    handle(top.time, top.item);
  }

  const endMs = Math.max(trace.durationMs, Math.min(horizon, lastDone));
  const latenciesMs = new Float64Array(jobs.length);
  const byClass = new Map<string, number[]>([
    ["all", []],
    ["request", []],
  ]);
  const requestLatency = new Float64Array(trace.requests);
  let answered = 0;
  for (const job of jobs) {
    const l = doneAt[job.id]! <= horizon ? doneAt[job.id]! - job.arrivalMs + pathMs : Infinity;
    latenciesMs[job.id] = l;
    if (Number.isFinite(l)) answered += 1;
    byClass.get("all")!.push(l);
    const id = trace.models[job.model]!.id;
    if (!byClass.has(id)) byClass.set(id, []);
    byClass.get(id)!.push(l);
    // An agent request waits for its slowest call (its calls arrive together).
    requestLatency[job.request] = Math.max(requestLatency[job.request]!, l);
  }
  byClass.set("request", Array.from(requestLatency));
  const latency: Record<string, LatencySummary> = {};
  for (const [k, v] of byClass) latency[k] = summarise(v);
  let answeredTokens = 0;
  for (const job of jobs) if (Number.isFinite(latenciesMs[job.id]!)) answeredTokens += job.totalTokens;
  return {
    policy: opts.policy.name,
    jobs: jobs.length,
    offeredJobsPerSecond: jobs.length / (trace.durationMs / 1000),
    throughputJobsPerSecond: answered / (endMs / 1000),
    usefulTokensPerSecond: answeredTokens / (endMs / 1000),
    answeredFraction: jobs.length === 0 ? 1 : answered / jobs.length,
    latency,
    busyFraction: devices.map((d) => d.busyMs / endMs),
    usefulTokenFraction: paddedTokens === 0 ? 1 : usefulTokens / paddedTokens,
    jobsWaitedWhileIdle: waitedWhileIdle.reduce((a, b) => a + b, 0),
    loads,
    batches,
    endMs,
    latenciesMs,
  };
}
