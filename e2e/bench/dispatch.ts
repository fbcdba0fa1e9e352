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
 *
 * Options: --seed N (1), --workers N, --loads a,b,c, --seconds N per point, --profile
 * (cpu-minilm: a lone median request takes ~100+ ms, so
 * the Kafka path's fixed tens of ms stay small against it), --dilation (1; gpu-a100-bert needs ~20
 * for timers to stay small against its service times, and its 1.5 s model load × dilation must fit
 * the harness's 60 s start wait), --arms (see dispatch-arms.ts), --max-lag f (0.05).
 * One served model: every call shape goes to it (the issue's "one model instead of nine" ablation).
 * Env: KAFKA_BROKERS (default: a scratch broker started for the run).
 */
import { parseArgs } from "node:util";
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel, mulberry32 } from "@shoal/models";
import { generateTrace, loneJobMs, simulate, WORKER_BATCHING, type Trace } from "@shoal/sim";
import { lagVerdict } from "@shoal/worker/runtime/simulated/device";
import { simProfile } from "@shoal/worker/runtime/simulated/profile";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape, total } from "../harness/prometheus.ts";
import { kneeOf, loadPoint, passes, type LoadPoint } from "./dispatch-analysis.ts";
import { DEFAULT_ARMS, parseArms, type DispatchArm } from "./dispatch-arms.ts";
import { benchBroker } from "./bench-broker.ts";
import { percentile, textOfTokens } from "./workload.ts";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    workers: { type: "string" },
    loads: { type: "string" },
    seconds: { type: "string" },
    profile: { type: "string", default: "cpu-minilm" },
    dilation: { type: "string", default: "1" },
    arms: { type: "string", default: DEFAULT_ARMS },
    "max-lag": { type: "string", default: "0.05" },
  },
});
const QUICK = args.quick;
const SEED = Number(args.seed);
const WORKERS = Number(args.workers ?? (QUICK ? 3 : 4));
// ρ counts unbatched work, and batching saves much of it: knees lie above 1.
const LOADS = (args.loads ?? (QUICK ? "0.5,1,1.5,2,3" : "0.25,0.5,0.75,1,1.25,1.5,2,2.5,3,4")).split(",").map(Number);
const SECONDS = Number(args.seconds ?? (QUICK ? 6 : 20));
const PROFILE = simProfile(args.profile);
const DILATION = Number(args.dilation);
const MAX_LAG = Number(args["max-lag"]);
const SLO_MULTIPLES = [5, 10, 20];
const ARMS = parseArms(args.arms, WORKERS);
// A worker tuned for its hardware sets its per-call overhead to the profile's a ÷ b (as bench:dispatch-sim does).
const BATCHING = { ...WORKER_BATCHING, perCallOverheadTokens: Math.round(PROFILE.aMs / Math.max(PROFILE.bMsPerToken, 1e-9)) };
const COST = { aMs: PROFILE.aMs * DILATION, bMsPerToken: PROFILE.bMsPerToken * DILATION, cMsPerToken2: PROFILE.cMsPerToken2 * DILATION };
const CALL_TIMEOUT_MS = 20_000;

const log = (m: string): void => void process.stderr.write(`${m}\n`);

/** The trace at load ρ: same requests, only time scaled (as services/sim's sweep builds it). */
function traceAt(requestsPerSecond: number, requests: number): Trace {
  const gapMs = 1000 / requestsPerSecond;
  return generateTrace({ seed: SEED, requests, requestsPerSecond, calmMeanMs: 300 * gapMs, burstMeanMs: 75 * gapMs });
}
const reference = traceAt(1, 2_000);
const loneRequest = new Array<number>(reference.requests).fill(0);
let work = 0;
for (const j of reference.jobs) {
  const ms = loneJobMs(j, COST, BATCHING);
  work += ms;
  loneRequest[j.request] = Math.max(loneRequest[j.request]!, ms);
}
const LONE_MEDIAN_MS = percentile(loneRequest, 50);
const WORK_PER_REQUEST_MS = work / reference.requests;
const rateAt = (load: number): number => (load * WORKERS * 1000) / WORK_PER_REQUEST_MS;
const SLOS = SLO_MULTIPLES.map((k) => ({ k, ms: k * LONE_MEDIAN_MS }));
const LOOSEST_MS = Math.max(...SLOS.map((s) => s.ms));

/** The DES twin of a point: the same trace, one model (as served live), the same router. */
function twinOf(arm: DispatchArm, trace: Trace): LoadPoint & { busy: number } {
  const oneModel: Trace = { ...trace, models: [trace.models[0]!], jobs: trace.jobs.map((j) => ({ ...j, model: 0 })) };
  const r = simulate({ trace: oneModel, devices: WORKERS, cost: COST, policy: arm.twin, batching: BATCHING, seed: SEED });
  return {
    load: 0,
    jobs: r.jobs,
    answeredFraction: r.answeredFraction,
    requestP50Ms: r.latency["request"]!.p50Ms,
    requestP99Ms: r.latency["request"]!.p99Ms,
    throughputJobsPerSecond: r.throughputJobsPerSecond,
    busy: r.busyFraction.reduce((a, b) => a + b, 0) / r.busyFraction.length,
  };
}

interface ArmRun {
  readonly arm: DispatchArm;
  readonly points: { live: LoadPoint; twin: LoadPoint & { busy: number }; busy: number }[];
  readonly lagVerdicts: string[];
  readonly worstLag: number;
}

let current: TestCluster | undefined;

async function runArm(arm: DispatchArm, texts: Map<number, string>): Promise<ArmRun> {
  log(
    `==> arm ${arm.name}: ${
      arm.routed
        ? `gateway ${Object.entries(arm.gatewayEnv)
            .map(([k, v]) => `${k}=${v}`)
            .join(" ")}`
        : `${arm.intake} intake, ${arm.partitions} partition(s)`
    }, ${WORKERS} workers on simulated:${PROFILE.id} x${DILATION}`,
  );
  const cluster = await startCluster({
    workers: WORKERS,
    presets: ["mini"],
    intake: arm.intake,
    partitions: arm.partitions,
    gatewayEnv: { ...arm.gatewayEnv },
    workerEnv: {
      SHOAL_RUNTIME: `simulated:${PROFILE.id}`,
      SHOAL_SIM_DILATION: String(DILATION),
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
    const model = cluster.modelIds[0]!;
    const clients = clientsFor(cluster.urls[0]!, "grpc");
    if (arm.routed) {
      for (const deadline = Date.now() + 20_000; ; ) {
        const { workers } = await clients.cluster.getCluster({});
        if (workers.filter((w) => w.routedIntake).length === WORKERS) break;
        if (Date.now() > deadline) throw new Error(`the gateway never saw ${WORKERS} routed workers`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const call = (inputs: string[]) => clients.inference.embed({ model, inputs }, { timeoutMs: CALL_TIMEOUT_MS });
    // Every worker joined and serving before the clock starts (group: the last rebalance done).
    for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: 4 * WORKERS }, () => call([texts.get(16)!])));
    const points: ArmRun["points"] = [];
    for (const load of LOADS) {
      const rate = rateAt(load);
      const trace = traceAt(rate, Math.max(20, Math.round(rate * SECONDS)));
      const busyBefore = await Promise.all(metricsUrls.map(inferenceSeconds));
      const latencies: (number | undefined)[] = new Array(trace.jobs.length).fill(undefined);
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
          call(job.tokens.map((n) => texts.get(n)!)).then(
            () => {
              const doneMs = performance.now() - t0;
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
      const busyAfter = await Promise.all(metricsUrls.map(inferenceSeconds));
      const live = loadPoint(load, trace.jobs, latencies, lastAnswerMs);
      const busy = busyAfter.reduce((s, b, i) => s + b - busyBefore[i]!, 0) / WORKERS / (lastAnswerMs / 1000);
      const twin = twinOf(arm, trace);
      points.push({ live, twin, busy });
      log(
        `   ${arm.name} ρ=${load}: ${trace.jobs.length} jobs, answered ${(live.answeredFraction * 100).toFixed(1)}%, request p50/p99 ${fmtMs(live.requestP50Ms)}/${fmtMs(live.requestP99Ms)} ms, ` +
          `${live.throughputJobsPerSecond.toFixed(1)} jobs/s, busy ${busy.toFixed(2)} | DES twin p99 ${fmtMs(twin.requestP99Ms)} ms, ${twin.throughputJobsPerSecond.toFixed(1)} jobs/s`,
      );
      // Past the loosest SLO there is no knee left to find.
      if (!passes(live, LOOSEST_MS)) break;
    }
    const lags = await Promise.all(metricsUrls.map((u) => scrape(u)));
    const lagVerdicts: string[] = [];
    let worstLag = 0;
    for (const [i, s] of lags.entries()) {
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
      if (verdict) lagVerdicts.push(`${arm.name} worker ${i}: ${verdict}`);
    }
    return { arm, points, lagVerdicts, worstLag };
  } finally {
    await cluster.stop();
    current = undefined;
  }
}

async function inferenceSeconds(url: string): Promise<number> {
  const s = await scrape(url);
  let sum = 0;
  for (const line of s.text.split("\n")) if (line.startsWith("shoal_worker_inference_seconds_sum")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

const fmtMs = (ms: number): string => (Number.isFinite(ms) ? ms.toFixed(0) : "∞");

const broker = await benchBroker(log, () => current);

try {
  const started = performance.now();
  log(
    `bench:dispatch: seed ${SEED}, ${WORKERS} workers on simulated:${PROFILE.id} x${DILATION}, loads ${LOADS.join("/")}, ${SECONDS} s of arrivals per point; ` +
      `lone median request ${LONE_MEDIAN_MS.toFixed(1)} ms, SLOs ${SLOS.map((s) => `${s.k}x=${s.ms.toFixed(0)} ms`).join(", ")}; arms ${ARMS.map((a) => a.name).join(", ")}`,
  );
  const spec = await readModelDir(await ensureModel("mini"));
  const tokenizer = await createTextTokenizer(spec);
  const rand = mulberry32(SEED);
  const texts = new Map<number, string>();
  for (const n of [16, ...new Set(LOADS.flatMap((l) => traceAt(rateAt(l), Math.max(20, Math.round(rateAt(l) * SECONDS))).jobs.flatMap((j) => j.tokens)))]) {
    if (!texts.has(n)) texts.set(n, textOfTokens(tokenizer, n, rand).text);
  }
  const runs: ArmRun[] = [];
  for (const arm of ARMS) runs.push(await runArm(arm, texts));
  printReport(runs);
  log(`bench:dispatch done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
} finally {
  await broker?.stop();
}

function printReport(runs: readonly ArmRun[]): void {
  const refusals = runs.flatMap((r) => r.lagVerdicts);
  const ref = runs[0]!;
  const knees = runs.map((r) =>
    SLOS.map((s) =>
      kneeOf(
        r.points.map((p) => p.live),
        s.ms,
      ),
    ),
  );
  const twinKnees = runs.map((r) =>
    SLOS.map((s) =>
      kneeOf(
        r.points.map((p) => ({ ...p.twin, load: p.live.load })),
        s.ms,
      ),
    ),
  );
  const ratio = (a: number, b: number): string => (!Number.isFinite(a) || !Number.isFinite(b) ? "—" : b === 0 ? (a === 0 ? "—" : "∞") : (a / b).toFixed(2));
  const lines = [
    "",
    `Shoal dispatch benchmark (live) — seed ${SEED}, ${WORKERS} workers on simulated:${PROFILE.id} x${DILATION} (1 device each), 1 gateway, 1 broker, one served model;`,
    `loads ρ ${LOADS.join("/")} (${SECONDS} s of arrivals each, swept until the loosest SLO fails); lone median request ${LONE_MEDIAN_MS.toFixed(1)} ms.`,
    `Knee: highest ρ with ≥ 99% answered and agent-request p99 ≤ SLO. Ratio: ${ref.arm.name} knee ÷ the arm's knee (goodput at the knee in jobs/s).`,
    "",
    `| arm | ${SLOS.map((s) => `knee ρ @${s.k}x (${s.ms.toFixed(0)} ms)`).join(" | ")} | ${SLOS.map((s) => `${ref.arm.name} ÷ arm @${s.k}x`).join(" | ")} | DES twin knee ρ @${SLOS.map((s) => `${s.k}x`).join("/")} | worst timer lag |`,
    `|---|${SLOS.map(() => "---:|").join("")}${SLOS.map(() => "---:|").join("")}---:|---:|`,
    ...runs.map(
      (r, i) =>
        `| ${r.arm.name} | ${knees[i]!.map((k) => `${k.load} (${k.goodputJobsPerSecond.toFixed(0)}/s)`).join(" | ")} | ${knees[i]!.map((k, s) => ratio(knees[0]![s]!.load, k.load)).join(" | ")} | ${twinKnees[i]!.map((k) => k.load).join("/")} | ${(r.worstLag * 100).toFixed(1)}% |`,
    ),
    "",
    "Every point, live vs its discrete-event twin (same trace, same router code, one model):",
    "",
    "| arm | ρ | answered | request p50 ms | request p99 ms | jobs/s | busy | DES p99 ms | DES jobs/s | DES busy | p99 live ÷ DES | jobs/s live ÷ DES |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...runs.flatMap((r) =>
      r.points.map(
        ({ live, twin, busy }) =>
          `| ${r.arm.name} | ${live.load} | ${(live.answeredFraction * 100).toFixed(1)}% | ${fmtMs(live.requestP50Ms)} | ${fmtMs(live.requestP99Ms)} | ${live.throughputJobsPerSecond.toFixed(1)} | ${busy.toFixed(2)} | ${fmtMs(twin.requestP99Ms)} | ${twin.throughputJobsPerSecond.toFixed(1)} | ${twin.busy.toFixed(2)} | ${ratio(live.requestP99Ms, twin.requestP99Ms)} | ${ratio(live.throughputJobsPerSecond, twin.throughputJobsPerSecond)} |`,
      ),
    ),
  ];
  if (refusals.length > 0) {
    lines.push("", `REFUSED: the event loop, not the profile, shaped these latencies (limit --max-lag ${MAX_LAG}):`, ...refusals);
    process.exitCode = 3;
  }
  console.log(lines.join("\n"));
}
