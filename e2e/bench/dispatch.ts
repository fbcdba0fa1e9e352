/**
 * `npm run bench:dispatch` — the thesis, live (issue #16): the same seeded open-loop agent trace
 * (services/sim's generator: the contract-review agent's nine call shapes, Zipf popularity,
 * log-normal lengths, calm/burst arrivals, fan-out), offered to a live cluster of N workers on
 * simulated accelerators, once per dispatch arm:
 *  - `share`: the shared queue (Kafka share group, 1 partition);
 *  - `group`: a consumer group on 2N partitions (the job key picks the partition, so the worker);
 *  - routed (SHOAL_DISPATCH, the gateway picks a worker and writes to its own topic):
 *    `round-robin`, `least-loaded`, `p2c`, `sie-direct` (and `partition`: model → worker).
 * Each arm sweeps the offered load ρ (mean unbatched device work ÷ capacity) upwards until it
 * fails the loosest SLO, and its knee per SLO is the highest load with ≥ 99% answered and agent-
 * request p99 ≤ SLO (5×, 10×, 20× the lone median request's service time, dilated). Prints each
 * load point, a knee table with the ratios shared ÷ each arm, and the discrete-event twin of every
 * point (the same trace through services/sim with the same router code) beside the live figures.
 * Refuses (exit 3) a run whose simulated devices' timers overshot more than --max-lag of their
 * planned service time (lagVerdict). Gates nothing: a benchmark.
 *
 *   npm run bench:dispatch                       # 4 workers, ρ 0.25..4, 20 s of arrivals per point
 *   npm run bench:dispatch -- --quick            # 3 workers, ρ 0.5..3, 6 s per point (a few minutes)
 *   npm run bench:dispatch -- --arms share,least-loaded@SHOAL_DISPATCH_REFRESH_MS=50+SHOAL_DISPATCH_COUNT_OWN=0
 *   npm run bench:dispatch -- --json out.json --chart docs/bench/dispatch.svg
 *   (--calls calls.jsonl: every call, live and twin latency side by side and the worker that ran it, one JSON line each)
 *
 * Every routed setting listed is a candidate of the tuning sweep: the report names the best-tuned
 * routed arm per SLO. Ablations: --models 1 (one model instead of nine), --burst-factor 1 (no
 * bursts), --gateways 2 (each with its own stale view; an agent request's calls go to one gateway),
 * --zipf 0|1.5.
 *
 * Options: --seed N (1), --workers N, --loads a,b,c, --seconds N per point, --profile
 * (cpu-minilm: a lone median request takes ~100+ ms, so
 * the Kafka path's fixed tens of ms stay small against it), --dilation (1; gpu-a100-bert needs ~20
 * for timers to stay small against its service times, and its 1.5 s model load × dilation must fit
 * the harness's 60 s start wait), --arms (see dispatch-arms.ts), --max-lag f (0.05), --models 9|1,
 * --gateways N, --zipf s, --burst-factor f, --json FILE, --chart FILE.svg, --refine N (after the grid,
 * up to N more live points per arm bisecting its 10× knee, and its DES twin's likewise in virtual
 * time: knees on a coarse grid make every ratio a ratio of grid steps), --load-ms N (SHOAL_SIM_LOAD_MS: a model
 * load's cost in profile ms, for profiles whose real load × dilation would make the start minutes long).
 * Nine models (default): the trace's nine model ids are served as nine catalog entries of one
 * simulated model directory (each its own residency, batches and metrics); the DES twin serves the same nine.
 * The live path outside the device (gateway, Kafka both ways) is measured with lone calls before
 * the sweep and added to every twin answer, so live and twin compare like with like.
 * Env: KAFKA_BROKERS (default: a scratch broker started for the run).
 */
import { appendFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel, mulberry32 } from "@shoal/models";
import { sharedQueue, simulate, type Trace, type TraceJob } from "@shoal/sim";
import { defaultIdleTakeTokens } from "@shoal/worker/config";
import { lagVerdict } from "@shoal/worker/runtime/simulated/device";
import { callCostMs, simProfile } from "@shoal/worker/runtime/simulated/profile";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape, total } from "../harness/prometheus.ts";
import { benchBroker } from "./bench-broker.ts";
import { loadPoint, nextKneeProbe, passes, type LoadPoint } from "./dispatch-analysis.ts";
import { DEFAULT_ARMS, parseArms, type DispatchArm } from "./dispatch-arms.ts";
import { dispatchChartSvg } from "./dispatch-chart.ts";
import { benchDevice, benchScale, benchTraceAt } from "./dispatch-trace.ts";
import { reportLines, twinLoadPoints, writeInfinity, type ArmPoint, type ArmResult, type DispatchResults } from "./dispatch-report.ts";
import { percentile, textOfTokens } from "./workload.ts";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    real: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    workers: { type: "string" },
    gateways: { type: "string", default: "1" },
    models: { type: "string", default: "9" },
    zipf: { type: "string", default: "1.1" },
    "burst-factor": { type: "string", default: "4" },
    loads: { type: "string" },
    seconds: { type: "string" },
    profile: { type: "string", default: "cpu-minilm" },
    dilation: { type: "string", default: "1" },
    "load-ms": { type: "string" },
    arms: { type: "string", default: DEFAULT_ARMS },
    "max-lag": { type: "string", default: "0.05" },
    json: { type: "string" },
    calls: { type: "string" },
    chart: { type: "string" },
    "router-time": { type: "string", default: "device" },
    refine: { type: "string", default: "0" },
  },
});
const QUICK = args.quick;
/** Real compute: workers run the MiniLM-shaped model on onnxruntime-node (one inference thread each); the profile then only sizes the loads and the DES twin. */
const REAL = args.real;
const SEED = Number(args.seed);
const WORKERS = Number(args.workers ?? (QUICK ? 3 : 4));
const GATEWAYS = Number(args.gateways);
const MODELS = Number(args.models);
if (MODELS !== 1 && MODELS !== 9) throw new Error(`--models is 9 (the agent's nine) or 1 (the ablation), not ${args.models}`);
const ZIPF = Number(args.zipf);
const BURST_FACTOR = Number(args["burst-factor"]);
// ρ counts unbatched work, and batching saves much of it: knees lie above 1.
const LOADS = (args.loads ?? (QUICK ? "0.5,1,1.5,2,3" : "0.25,0.5,0.75,1,1.25,1.5,2,2.5,3,4")).split(",").map(Number);
const SECONDS = Number(args.seconds ?? (QUICK ? 6 : 20));
const PROFILE = simProfile(args.profile);
const DILATION = Number(args.dilation);
const MAX_LAG = Number(args["max-lag"]);
const SLO_MULTIPLES = [5, 10, 20];
/** `--refine N`: up to N more live points per arm, bisecting its knee at the headline SLO (10×) between the grid's loads. */
const REFINE = Number(args.refine);
if (!Number.isInteger(REFINE) || REFINE < 0) throw new Error(`--refine is a whole number of points, not ${args.refine}`);
/** Twin-only points per arm narrowing its DES twin's 10× knee the same way (virtual time: cheap), when refining. */
const TWIN_PROBES = 8;
const ROUTER_TIME = args["router-time"];
if (ROUTER_TIME !== "device" && ROUTER_TIME !== "wall") throw new Error(`--router-time is device (default) or wall, not ${ROUTER_TIME}`);
// A worker tuned for its hardware sets its per-call overhead to the profile's a ÷ b (as bench:dispatch-sim does).
const { cost: COST, batching: BATCHING } = benchDevice(PROFILE, DILATION);
/** A worker's default idle take here (one inference thread each). */
const IDLE_TAKE_TOKENS = defaultIdleTakeTokens(1, BATCHING.maxBatchTokens, BATCHING.perCallOverheadTokens);
/**
 * Routers' refresh and status intervals in the emulated device's time (×dilation), or as given
 * (wall: the runs before 2026-12-05's); the per-lane shared queue's twin takes a worker's default
 * idle take (one inference thread each here).
 */
const ARMS = parseArms(args.arms, WORKERS, ROUTER_TIME === "device" ? DILATION : 1, IDLE_TAKE_TOKENS);
const CALL_TIMEOUT_MS = 20_000;

const log = (m: string): void => void process.stderr.write(`${m}\n`);

const TRACE = { seed: SEED, zipfS: ZIPF, burstFactor: BURST_FACTOR, models: MODELS };
const traceAt = (requestsPerSecond: number, requests: number): Trace => benchTraceAt(TRACE, requestsPerSecond, requests);
const { reference, loneMedianMs: LONE_MEDIAN_MS, rateAt } = benchScale(TRACE, COST, BATCHING, WORKERS);
/** The trace a point at offered load ρ sends: SECONDS of arrivals, at least 20 requests. */
const traceOfPoint = (load: number): Trace => traceAt(rateAt(load), Math.max(20, Math.round(rateAt(load) * SECONDS)));
const SLOS = SLO_MULTIPLES.map((k) => ({ k, ms: k * LONE_MEDIAN_MS }));
const LOOSEST_MS = Math.max(...SLOS.map((s) => s.ms));
const PATH_PROBE_TOKENS = 16;
const RUNTIME_LABEL = REAL
  ? `onnxruntime-node (real compute; DES twin and loads sized by ${PROFILE.id})`
  : `simulated:${PROFILE.id} x${DILATION}${ROUTER_TIME === "device" && DILATION !== 1 ? ` (router refresh and status intervals x${DILATION} too)` : ""}`;
if (REAL && (DILATION !== 1 || PROFILE.id !== "cpu-minilm")) throw new Error("--real runs the CPU model itself: use the cpu-minilm profile, dilation 1");

/** The DES twin of a point: the same trace and models, the same router, the live path's fixed latency. */
function twinOf(
  arm: DispatchArm,
  trace: Trace,
  pathMs: number,
): { point: LoadPoint; busy: number; useful: number; jobP99ByModelMs: number[]; latenciesMs: Float64Array } {
  const r = simulate({ trace, devices: WORKERS, cost: COST, policy: arm.twin, batching: BATCHING, seed: SEED, pathMs, statusMs: arm.statusMs ?? 0 });
  return {
    jobP99ByModelMs: reference.models.map((m) => r.latency[m.id]?.p99Ms ?? Number.NaN),
    latenciesMs: r.latenciesMs,
    point: {
      load: 0,
      jobs: r.jobs,
      answeredFraction: r.answeredFraction,
      requestP50Ms: r.latency["request"]!.p50Ms,
      requestP99Ms: r.latency["request"]!.p99Ms,
      throughputJobsPerSecond: r.throughputJobsPerSecond,
    },
    busy: r.busyFraction.reduce((a, b) => a + b, 0) / r.busyFraction.length,
    useful: r.usefulTokenFraction,
  };
}

/**
 * Request p99 of the shared queue's twin whose busy devices go round the models in turn, as a busy
 * share-intake worker does, instead of taking the oldest job's model, and take as many batches at
 * once as the arm's workers do (their idle take, SHOAL_IDLE_TAKE_TOKENS, in batches): the part of
 * the live tail that order and take alone explain.
 */
function rotationP99Ms(trace: Trace, pathMs: number, takeBatches: number): number {
  const policy = sharedQueue({ order: "rotation", takeBatches });
  return simulate({ trace, devices: WORKERS, cost: COST, policy, batching: BATCHING, seed: SEED, pathMs }).latency["request"]!.p99Ms;
}

/** An arm's workers' idle take in whole batches (at least one). */
function takeBatchesOf(arm: DispatchArm): number {
  const tokens = Number(arm.workerEnv["SHOAL_IDLE_TAKE_TOKENS"] ?? IDLE_TAKE_TOKENS);
  return Math.max(1, Math.round(tokens / BATCHING.maxBatchTokens));
}

let current: TestCluster | undefined;

/** Sums of the workers' device counters: inference seconds, useful and padded tokens; share jobs given back unrun. */
async function deviceCounters(urls: readonly string[]): Promise<{ seconds: number; tokens: number; padded: number; givenBack: number }> {
  const scrapes = await Promise.all(urls.map((u) => scrape(u)));
  let seconds = 0;
  for (const s of scrapes)
    for (const line of s.text.split("\n")) if (line.startsWith("shoal_worker_inference_seconds_sum")) seconds += Number(line.slice(line.lastIndexOf(" ") + 1));
  return {
    seconds,
    tokens: scrapes.reduce((n, s) => n + total(s, "shoal_worker_tokens_total"), 0),
    padded: scrapes.reduce((n, s) => n + total(s, "shoal_worker_padded_tokens_total"), 0),
    givenBack: scrapes.reduce((n, s) => n + total(s, "shoal_worker_share_given_back_total"), 0),
  };
}

/** One answered call's timing (queue: gateway enqueue → batch start; deliveries: times a worker was handed it). */
interface CallTiming {
  readonly queueMs: number;
  readonly heldMs: number;
  readonly inferenceMs: number;
  readonly totalMs: number;
  readonly deliveries: number;
  /** The worker that answered (the `shoal-worker` response header). */
  readonly worker: string;
}

/**
 * Calls handed to a worker more than once (given back, or lost) against the rest: how many, and
 * each group's latency over its DES twin's (same job), p50 and p99: where the live tail comes from.
 */
function redeliveredCalls(
  latencies: readonly (number | undefined)[],
  timings: readonly (CallTiming | undefined)[],
  twinMs: Float64Array,
): { calls: number; excessOnceMs: [number, number]; excessRedeliveredMs: [number, number]; heldRedeliveredMs: number } {
  const once: number[] = [];
  const again: number[] = [];
  const held: number[] = [];
  latencies.forEach((l, i) => {
    const t = timings[i];
    if (l === undefined || t === undefined || !Number.isFinite(twinMs[i]!)) return;
    if (t.deliveries > 1) {
      again.push(l - twinMs[i]!);
      held.push(t.heldMs);
    } else once.push(l - twinMs[i]!);
  });
  const p = (xs: number[]): [number, number] => [percentile(xs, 50), percentile(xs, 99)];
  return { calls: again.length, excessOnceMs: p(once), excessRedeliveredMs: p(again), heldRedeliveredMs: percentile(held, 50) };
}

/** `--calls FILE`: one JSON line per call (arm, load, job, model, arrival, live and twin latency, timing, the worker that ran it), to study the tail. */
async function appendCalls(
  file: string,
  arm: string,
  load: number,
  trace: Trace,
  latencies: readonly (number | undefined)[],
  timings: readonly (CallTiming | undefined)[],
  twinMs: Float64Array,
): Promise<void> {
  const lines = trace.jobs.map((job, i) =>
    JSON.stringify({
      arm,
      load,
      job: job.id,
      request: job.request,
      model: job.model,
      arrivalMs: job.arrivalMs,
      burst: job.burst,
      tokens: job.totalTokens,
      ms: latencies[i] ?? null,
      twinMs: Number.isFinite(twinMs[i]!) ? twinMs[i] : null,
      ...(timings[i] ?? {}),
    }),
  );
  await appendFile(file, `${lines.join("\n")}\n`);
}

/** Median breakdown of the slowest 1% of answered calls: where the tail's time went. */
function slowestCalls(
  latencies: readonly (number | undefined)[],
  timings: readonly (CallTiming | undefined)[],
): { calls: number; clientMs: number; totalMs: number; queueMs: number; heldMs: number; inferenceMs: number } {
  const answered = latencies.flatMap((l, i) => (l !== undefined && timings[i] ? [{ l, t: timings[i]! }] : [])).sort((a, b) => b.l - a.l);
  const tail = answered.slice(0, Math.max(1, Math.ceil(answered.length / 100)));
  const med = (xs: number[]): number => percentile(xs, 50);
  return {
    calls: tail.length,
    clientMs: med(tail.map((c) => c.l)),
    totalMs: med(tail.map((c) => c.t.totalMs)),
    queueMs: med(tail.map((c) => c.t.queueMs)),
    heldMs: med(tail.map((c) => c.t.heldMs)),
    inferenceMs: med(tail.map((c) => c.t.inferenceMs)),
  };
}

/**
 * @param textOf a text of that many tokens (made once per count; every count of a trace is asked
 *   for before its clock starts)
 */
async function runArm(arm: DispatchArm, textOf: (tokens: number) => string): Promise<ArmResult> {
  log(
    `==> arm ${arm.name}: ${
      arm.routed
        ? `gateway ${Object.entries(arm.gatewayEnv)
            .map(([k, v]) => `${k}=${v}`)
            .join(" ")}`
        : `${arm.intake} intake, ${arm.partitions} partition(s), jobs topics ${arm.jobTopics}`
    }, ${WORKERS} workers on ${RUNTIME_LABEL}, ${GATEWAYS} gateway(s), ${MODELS} model(s)`,
  );
  const modelDir = await ensureModel("mini");
  const cluster = await startCluster({
    workers: WORKERS,
    gateways: GATEWAYS,
    presets: [],
    entries: reference.models.map((m) => ({ dir: modelDir, fields: { id: m.id } })),
    intake: arm.intake,
    partitions: arm.partitions,
    jobTopics: arm.jobTopics,
    gatewayEnv: { ...arm.gatewayEnv },
    workerEnv: {
      ...(REAL
        ? { SHOAL_INTRA_OP_THREADS: "1" }
        : {
            SHOAL_RUNTIME: `simulated:${PROFILE.id}`,
            SHOAL_SIM_DILATION: String(DILATION),
            ...(args["load-ms"] !== undefined ? { SHOAL_SIM_LOAD_MS: args["load-ms"] } : {}),
          }),
      SHOAL_INFERENCE_THREADS: "1",
      SHOAL_PER_CALL_OVERHEAD_TOKENS: String(BATCHING.perCallOverheadTokens),
      ...arm.workerEnv,
    },
  });
  current = cluster;
  try {
    const metricsUrls = await Promise.all(
      cluster.workers.map(async (w) => `http://127.0.0.1:${String((await w.waitForLog((l) => l.msg === "worker pulling jobs"))["httpPort"])}/metrics`),
    );
    const clients = cluster.urls.map((u) => clientsFor(u, "grpc"));
    if (arm.routed) {
      for (const deadline = Date.now() + 20_000; ; ) {
        const views = await Promise.all(clients.map((c) => c.cluster.getCluster({})));
        if (views.every((v) => v.workers.filter((w) => w.routedIntake).length === WORKERS)) break;
        if (Date.now() > deadline) throw new Error(`the gateways never saw ${WORKERS} routed workers`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    // An agent request's calls go to one gateway, requests spread over the gateways.
    const call = async (job: Pick<TraceJob, "request" | "model" | "tokens">) => {
      let worker = "";
      const res = await clients[job.request % clients.length]!.inference.embed(
        { model: reference.models[job.model]!.id, inputs: job.tokens.map(textOf) },
        { timeoutMs: CALL_TIMEOUT_MS, onHeader: (h) => (worker = h.get("shoal-worker") ?? "") },
      );
      return { ...res, worker };
    };
    // Every worker joined, every model loaded and serving before the clock starts (group: the last rebalance done).
    for (let i = 0; i < 3; i++)
      await Promise.all(
        reference.models.flatMap((_, model) => Array.from({ length: 2 * WORKERS }, (_, request) => call({ request, model, tokens: [PATH_PROBE_TOKENS] }))),
      );
    // The live path outside the device, measured on lone calls: their latency minus the device's planned cost.
    const probes: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await call({ request: i, model: 0, tokens: [PATH_PROBE_TOKENS] });
      probes.push(performance.now() - t - callCostMs(COST, 1, PATH_PROBE_TOKENS));
    }
    const pathMs = Math.max(0, percentile(probes, 50));
    log(`   ${arm.name}: live path outside the device ${pathMs.toFixed(1)} ms (median of 20 lone calls minus their device cost)`);
    const points: ArmPoint[] = [];
    const takeBatches = takeBatchesOf(arm);
    /** Offers the trace at `load`, adds the point to `points`, logs it. */
    const measure = async (load: number): Promise<ArmPoint> => {
      const trace = traceOfPoint(load);
      for (const job of trace.jobs) job.tokens.forEach(textOf);
      const before = await deviceCounters(metricsUrls);
      const latencies: (number | undefined)[] = new Array(trace.jobs.length).fill(undefined);
      /** Each answered call's own timing (queue: gateway enqueue → batch start), for the tail's breakdown. */
      const timings: (CallTiming | undefined)[] = new Array(trace.jobs.length).fill(undefined);
      let lastAnswerMs = 0;
      let inFlight = 0;
      let failed = 0;
      const t0 = performance.now() + 100;
      const progress = setInterval(() => {
        const done = latencies.filter((l) => l !== undefined).length;
        log(
          `   ${arm.name} ρ=${load} t=${((performance.now() - t0) / 1000).toFixed(0)}s: answered ${done}/${trace.jobs.length}, in flight ${inFlight}, failed ${failed}`,
        );
      }, 5_000);
      const pending: Promise<void>[] = [];
      for (const [i, job] of trace.jobs.entries()) {
        const wait = t0 + job.arrivalMs - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        inFlight++;
        pending.push(
          call(job).then(
            (res) => {
              const doneMs = performance.now() - t0;
              if (res.timing)
                timings[i] = {
                  queueMs: res.timing.queueMs,
                  heldMs: res.timing.heldMs,
                  inferenceMs: res.timing.inferenceMs,
                  totalMs: res.timing.totalMs,
                  deliveries: res.timing.deliveries,
                  worker: res.worker,
                };
              latencies[i] = doneMs - job.arrivalMs;
              lastAnswerMs = Math.max(lastAnswerMs, doneMs);
              inFlight--;
            },
            (err: unknown) => {
              inFlight--;
              if (++failed <= 2) log(`   ${arm.name} ρ=${load}: a call failed: ${String(err)}`);
            },
          ),
        );
      }
      await Promise.all(pending);
      clearInterval(progress);
      const after = await deviceCounters(metricsUrls);
      const live = loadPoint(load, trace.jobs, latencies, lastAnswerMs);
      const twin = twinOf(arm, trace, pathMs);
      const point = {
        live,
        twin: { ...twin.point, load },
        busy: (after.seconds - before.seconds) / WORKERS / (lastAnswerMs / 1000),
        twinBusy: twin.busy,
        usefulTokenFraction: after.padded > before.padded ? (after.tokens - before.tokens) / (after.padded - before.padded) : 1,
        twinUsefulTokenFraction: twin.useful,
        jobP99ByModelMs: reference.models.map((_, model) =>
          percentile(
            trace.jobs.flatMap((j, i) => (j.model === model && latencies[i] !== undefined ? [latencies[i]!] : [])),
            99,
          ),
        ),
        twinJobP99ByModelMs: twin.jobP99ByModelMs,
      } satisfies ArmPoint;
      points.push(point);
      log(
        `   ${arm.name} ρ=${load}: ${trace.jobs.length} jobs, answered ${(live.answeredFraction * 100).toFixed(1)}%, request p50/p99 ${fmtMs(live.requestP50Ms)}/${fmtMs(live.requestP99Ms)} ms, ` +
          `${live.throughputJobsPerSecond.toFixed(1)} jobs/s, busy ${point.busy.toFixed(2)} | DES twin p99 ${fmtMs(twin.point.requestP99Ms)} ms, ${twin.point.throughputJobsPerSecond.toFixed(1)} jobs/s` +
          (arm.jobTopics === "per-model"
            ? `; its busy devices going round the models instead, ${takeBatches} batch(es) a take: p99 ${fmtMs(rotationP99Ms(trace, pathMs, takeBatches))} ms`
            : ""),
      );
      const slowest = slowestCalls(latencies, timings);
      log(
        `     jobs given back unrun by the share intake: ${after.givenBack - before.givenBack}; slowest 1% of calls (${slowest.calls}), medians: client ${fmtMs(slowest.clientMs)}, gateway ${fmtMs(slowest.totalMs)}, of which queue ${fmtMs(slowest.queueMs)} (held by the worker ${fmtMs(slowest.heldMs)}) and inference ${fmtMs(slowest.inferenceMs)} ms`,
      );
      const again = redeliveredCalls(latencies, timings, twin.latenciesMs);
      if (args.calls !== undefined) await appendCalls(args.calls, arm.name, load, trace, latencies, timings, twin.latenciesMs);
      log(
        `     calls over their DES twin, p50/p99: delivered once ${fmtMs(again.excessOnceMs[0])}/${fmtMs(again.excessOnceMs[1])} ms; ` +
          (again.calls === 0
            ? "none delivered again"
            : `delivered again (${again.calls}) ${fmtMs(again.excessRedeliveredMs[0])}/${fmtMs(again.excessRedeliveredMs[1])} ms, held by the last worker ${fmtMs(again.heldRedeliveredMs)} ms (median)`),
      );
      log(
        `     job p99 by model, most popular first, live | DES: ${point.jobP99ByModelMs.map(fmtMs).join("/")} | ${point.twinJobP99ByModelMs.map(fmtMs).join("/")} ms`,
      );
      return point;
    };
    for (const load of LOADS) {
      // Past the loosest SLO there is no knee left to find.
      if (!passes((await measure(load)).live, LOOSEST_MS)) break;
    }
    // A grid of 0.4 makes every ratio of knees a ratio of grid steps (1.2 ÷ 1.6 = 0.75): narrow the headline knee down.
    const headlineMs = SLOS.find((s) => s.k === 10)!.ms;
    const liveCeiling = Math.max(...points.map((p) => p.live.load));
    for (let i = 0; i < REFINE; i++) {
      const load = nextKneeProbe(
        points.map((p) => p.live),
        headlineMs,
        liveCeiling,
      );
      if (load === undefined) break;
      log(`   ${arm.name}: narrowing the 10x knee down, ρ=${load}`);
      await measure(load);
    }
    points.sort((a, b) => a.live.load - b.live.load);
    const twinProbes: LoadPoint[] = [];
    for (let i = 0; REFINE > 0 && i < TWIN_PROBES; i++) {
      const load = nextKneeProbe([...twinLoadPoints(points), ...twinProbes], headlineMs, 2 * Math.max(...LOADS));
      if (load === undefined) break;
      twinProbes.push({ ...twinOf(arm, traceOfPoint(load), pathMs).point, load });
    }
    if (twinProbes.length > 0) log(`   ${arm.name}: DES twin alone at ρ ${twinProbes.map((p) => `${p.load} (p99 ${fmtMs(p.requestP99Ms)} ms)`).join(", ")}`);
    const { worstLag, lagVerdicts } = await lagOf(arm.name, metricsUrls);
    return { name: arm.name, family: arm.name.split("@")[0]!, routed: arm.routed, pathMs, points, twinProbes, worstLag, lagVerdicts };
  } finally {
    await cluster.stop();
    current = undefined;
  }
}

/** The simulated devices' timer lag, and a refusal per worker past --max-lag. */
async function lagOf(arm: string, metricsUrls: readonly string[]): Promise<{ worstLag: number; lagVerdicts: string[] }> {
  const lagVerdicts: string[] = [];
  let worstLag = 0;
  for (const [i, s] of (await Promise.all(metricsUrls.map((u) => scrape(u)))).entries()) {
    const ratio = total(s, "shoal_worker_simulated_timer_lag_ratio");
    worstLag = Math.max(worstLag, ratio);
    const verdict = lagVerdict(
      {
        samples: total(s, "shoal_worker_batches_total"),
        meanLagMs: total(s, "shoal_worker_simulated_timer_lag_seconds", { stat: "mean" }) * 1000,
        maxLagMs: total(s, "shoal_worker_simulated_timer_lag_seconds", { stat: "max" }) * 1000,
        maxLagFraction: 0,
        totalLagFraction: ratio,
      },
      MAX_LAG,
    );
    if (verdict) lagVerdicts.push(`${arm} worker ${i}: ${verdict}`);
  }
  return { worstLag, lagVerdicts };
}

const fmtMs = (ms: number): string => (Number.isFinite(ms) ? ms.toFixed(0) : "∞");

const broker = await benchBroker(log, () => current);

try {
  const started = performance.now();
  log(
    `bench:dispatch: seed ${SEED}, ${WORKERS} workers on ${RUNTIME_LABEL}, ${GATEWAYS} gateway(s), ${MODELS} model(s), Zipf ${ZIPF}, burst factor ${BURST_FACTOR}, ` +
      `loads ${LOADS.join("/")}, ${SECONDS} s of arrivals per point; lone median request ${LONE_MEDIAN_MS.toFixed(1)} ms, ` +
      `SLOs ${SLOS.map((s) => `${s.k}x=${s.ms.toFixed(0)} ms`).join(", ")}; arms ${ARMS.map((a) => a.name).join(", ")}`,
  );
  const spec = await readModelDir(await ensureModel("mini"));
  const tokenizer = await createTextTokenizer(spec);
  const rand = mulberry32(SEED);
  const texts = new Map<number, string>();
  const textOf = (n: number): string => {
    const known = texts.get(n);
    if (known !== undefined) return known;
    const text = textOfTokens(tokenizer, n, rand).text;
    texts.set(n, text);
    return text;
  };
  for (const n of [PATH_PROBE_TOKENS, ...new Set(LOADS.flatMap((l) => traceOfPoint(l).jobs.flatMap((j) => j.tokens)))]) textOf(n);
  const arms: ArmResult[] = [];
  const resultsOf = (): DispatchResults => ({
    command: `npm run bench:dispatch -- ${process.argv.slice(2).join(" ")}`.trim(),
    seed: SEED,
    workers: WORKERS,
    gateways: GATEWAYS,
    models: MODELS,
    profile: PROFILE.id,
    dilation: DILATION,
    runtime: RUNTIME_LABEL,
    zipf: ZIPF,
    burstFactor: BURST_FACTOR,
    secondsPerPoint: SECONDS,
    loneMedianMs: LONE_MEDIAN_MS,
    slos: SLOS,
    arms,
    maxLag: MAX_LAG,
  });
  // Written after every arm: a run stopped half-way keeps what it measured (bench:dispatch-merge joins runs).
  const writeJson = async (): Promise<void> => {
    if (args.json !== undefined) await writeFile(args.json, `${JSON.stringify(resultsOf(), writeInfinity, 2)}\n`);
  };
  for (const arm of ARMS) {
    arms.push(await runArm(arm, textOf));
    await writeJson();
  }
  const results = resultsOf();
  console.log(reportLines(results).join("\n"));
  if (arms.some((a) => a.lagVerdicts.length > 0)) process.exitCode = 3;
  if (args.chart !== undefined) {
    await writeFile(args.chart, await dispatchChartSvg(results));
    log(`wrote ${args.chart}`);
  }
  log(`bench:dispatch done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
} finally {
  await broker?.stop();
}
