/**
 * `npm run bench:intake` — what the shared queue changes (issue #15): the same seeded open-loop
 * workload, offered at the same load, to 4 workers on simulated accelerators taking jobs through
 *  - `share`: a Kafka share group (KIP-932) on a 1-partition pool: one shared queue;
 *  - `group4` / `group8`: a consumer group on 4 / 8 partitions: each partition owned by one
 *    worker, so the job's (random) key picks its worker — a static router.
 * Workload: short jobs (1 text of 16 tokens) and long jobs (8 texts of ~224 tokens), 4:1 by count,
 * arriving from a calm/burst Markov-modulated process (services/sim's trace generator).
 * Prints, per arm and as ratios share ÷ group: short/long p50/p99, throughput, per-worker busy
 * fraction (inference seconds from each worker's /metrics), and jobs that waited while some
 * worker was idle (each device logs its runs, SHOAL_SIM_LOG_CALLS; see intake-analysis.ts). Refuses the run when the simulated devices' timers overshot too much.
 * Asserts nothing and gates nothing: a benchmark, not a test.
 *
 *   npm run bench:intake                       # share, group4, group8; 40 s each after 6 s warm-up (~4 min)
 *   npm run bench:intake -- --quick            # share, group4; 6 s each after 2 s warm-up (~1.5 min)
 *   npm run bench:intake -- --seed 2 --load 0.7 --arms share,share@SHOAL_PREFETCH_TOKENS=2048,group4
 *
 * Options: --seed N (1), --seconds N (40), --warmup N (6), --load ρ (0.65: mean offered work ÷
 * capacity of the 4 devices), --profile (cpu-minilm), --dilation (3: a short job 10 ms, a long one
 * 820 ms, so timer lag on a shared 2-core machine stays small), --arms (share,group4,group8; an arm
 * may carry worker env: `share@K=V+K=V`), --max-lag f (0.05: refuse the run when a device's timers
 * overshot by more than f of its planned service time in total; lagVerdict).
 * Env BENCH_DUMP=prefix writes each arm's answers and device runs to `prefix-<arm>.json`.
 * Env: KAFKA_BROKERS (default: a scratch broker); BENCH_SHARE_ENV / BENCH_GROUP_ENV: extra worker
 * env for one kind of arm, `K=V,K=V` (e.g. BENCH_SHARE_ENV=SHOAL_PREFETCH_TOKENS=256).
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel, mulberry32 } from "@shoal/models";
import { generateTrace, type TraceModel } from "@shoal/sim";
import { lagVerdict } from "@shoal/worker/runtime/simulated/device";
import { callCostMs, simProfile } from "@shoal/worker/runtime/simulated/profile";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape, total, type Scrape } from "../harness/prometheus.ts";
import { armFigures, type AnsweredJob, type ArmFigures, type Interval, type JobShape, unbatchedCostMs } from "./intake-analysis.ts";
import { benchBroker } from "./bench-broker.ts";
import { percentile, textOfTokens } from "./workload.ts";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    seed: { type: "string", default: "1" },
    seconds: { type: "string" },
    warmup: { type: "string" },
    load: { type: "string", default: "0.65" },
    profile: { type: "string", default: "cpu-minilm" },
    dilation: { type: "string", default: "3" },
    arms: { type: "string" },
    "max-lag": { type: "string", default: "0.05" },
  },
});
const QUICK = args.quick;
const SEED = Number(args.seed);
const SECONDS = Number(args.seconds ?? (QUICK ? 6 : 40));
const WARMUP = Number(args.warmup ?? (QUICK ? 2 : 6));
const LOAD = Number(args.load);
const PROFILE = simProfile(args.profile);
const DILATION = Number(args.dilation);

const MAX_LAG = Number(args["max-lag"]);
const DEVICES = 4;
const WORKERS = 4;
const THRESHOLDS_MS = [2, 10, 50];
const MAIN_THRESHOLD_MS = 10;

interface Arm {
  readonly name: string;
  readonly intake: "share" | "group";
  readonly partitions: number;
  /** Extra worker env of this arm (`share@SHOAL_PREFETCH_TOKENS=1+K=V`). */
  readonly env: Record<string, string>;
}
const BASE_ARMS: Record<string, Omit<Arm, "name" | "env">> = {
  share: { intake: "share", partitions: 1 },
  group4: { intake: "group", partitions: 4 },
  group8: { intake: "group", partitions: 8 },
};
const arms: Arm[] = (args.arms ?? (QUICK ? "share,group4" : "share,group4,group8")).split(",").map((spec) => {
  const [base, extra] = spec.trim().split("@") as [string, string | undefined];
  const arm = BASE_ARMS[base];
  if (!arm) throw new Error(`unknown arm '${base}' (known: ${Object.keys(BASE_ARMS).join(", ")}, optionally @K=V+K=V)`);
  return {
    name: spec.trim(),
    ...arm,
    env: Object.fromEntries(
      (extra ?? "")
        .split("+")
        .filter((kv) => kv.includes("="))
        .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
    ),
  };
});

const log = (m: string): void => void process.stderr.write(`${m}\n`);
const envList = (s: string | undefined): Record<string, string> =>
  Object.fromEntries(
    (s ?? "")
      .split(",")
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );

// The workload: two job classes through the sim's calm/burst trace generator, one "model" each.
// Zipf s = 2 over two ranks: 80% short, 20% long by count. Bursts of ~400 ms at 4x the calm rate.
const CLASSES: readonly TraceModel[] = [
  { id: "short", task: "embed", maxTokens: 256, medianTokens: 16, sigma: 0, itemsMin: 1, itemsMax: 1 },
  { id: "long", task: "embed", maxTokens: 248, medianTokens: 224, sigma: 0.08, itemsMin: 8, itemsMax: 8 },
];
// Sojourns are in profile time: dilated with the device, so a burst spans the same work.
const TRACE_SHAPE = {
  zipfS: 2,
  fanOutMin: 1,
  fanOutMax: 1,
  burstFactor: 4,
  calmMeanMs: 1_600 * DILATION,
  burstMeanMs: 400 * DILATION,
  models: CLASSES,
} as const;

function makeTrace(requestsPerSecond: number) {
  const requests = Math.ceil(requestsPerSecond * (WARMUP + SECONDS) * 1.3) + 50;
  const t = generateTrace({ seed: SEED, requests, requestsPerSecond, ...TRACE_SHAPE });
  return t.jobs.filter((j) => j.arrivalMs < (WARMUP + SECONDS) * 1000);
}
const shapeOf = (j: { model: number; tokens: readonly number[] }): JobShape => ({ cls: j.model === 0 ? "short" : "long", tokens: j.tokens });
// Offered load: mean unbatched device time per job × rate ÷ devices. Calibrate the rate on a
// rate-1 trace (the mix does not depend on the rate), then check the realised load.
const probe = makeTrace(20);
const meanCost = probe.reduce((s, j) => s + unbatchedCostMs(PROFILE, shapeOf(j), DILATION), 0) / probe.length;
const offeredIn = (jobs: readonly { arrivalMs: number; model: number; tokens: readonly number[] }[]): number =>
  jobs.filter((j) => j.arrivalMs >= WARMUP * 1000).reduce((s, j) => s + unbatchedCostMs(PROFILE, shapeOf(j), DILATION), 0) / (DEVICES * SECONDS * 1000);
// A short window's bursts may offer more or less than the long-run mean: stretch or squeeze the
// trace's clock so the measured window offers the target load (same jobs, same order).
const RATE = (LOAD * DEVICES * 1000) / meanCost;
const raw = generateTrace({ seed: SEED, requests: Math.ceil(RATE * 3 * (WARMUP + SECONDS)) + 50, requestsPerSecond: RATE * 1.5, ...TRACE_SHAPE }).jobs;
let stretch = 1.5;
let trace: typeof raw = raw;
for (let pass = 0; pass < 8; pass++) {
  trace = raw.map((j) => ({ ...j, arrivalMs: j.arrivalMs * stretch })).filter((j) => j.arrivalMs < (WARMUP + SECONDS) * 1000);
  const off = offeredIn(trace);
  if (Math.abs(off / LOAD - 1) < 0.01) break;
  stretch *= off / LOAD;
}
const windowJobs = trace.filter((j) => j.arrivalMs >= WARMUP * 1000);
const realised = offeredIn(trace);
const burstJobs = windowJobs.filter((j) => j.burst);
/** Arrival rate in a burst ÷ long-run mean rate. */
const BURST_OVER_MEAN =
  (TRACE_SHAPE.burstFactor * (TRACE_SHAPE.calmMeanMs + TRACE_SHAPE.burstMeanMs)) / (TRACE_SHAPE.calmMeanMs + TRACE_SHAPE.burstFactor * TRACE_SHAPE.burstMeanMs);
const shortCost = callCostMs(PROFILE, 1, 16) * DILATION;
const longCost = callCostMs(PROFILE, 8, 224) * DILATION;

/** Worker metrics of interest. */
function workerFigures(s: Scrape): { inferenceS: number; batches: number; lagRatio: number; lagMaxMs: number; lagMeanMs: number } {
  let inferenceS = 0;
  for (const line of s.text.split("\n")) if (line.startsWith("shoal_worker_inference_seconds_sum")) inferenceS += Number(line.slice(line.lastIndexOf(" ") + 1));
  return {
    inferenceS,
    batches: total(s, "shoal_worker_batches_total"),
    lagRatio: total(s, "shoal_worker_simulated_timer_lag_ratio"),
    lagMaxMs: total(s, "shoal_worker_simulated_timer_lag_seconds", { stat: "max" }) * 1000,
    lagMeanMs: total(s, "shoal_worker_simulated_timer_lag_seconds", { stat: "mean" }) * 1000,
  };
}

interface ArmResult {
  readonly arm: Arm;
  readonly figures: ArmFigures;
  readonly busy: number[];
  readonly failed: number;
  readonly sendLagP99: number;
  readonly lag: { ratio: number; maxMs: number; meanMs: number; verdict: string | undefined }[];
}

async function runArm(arm: Arm, texts: Map<number, string>): Promise<ArmResult> {
  log(`==> arm ${arm.name}: intake ${arm.intake}, ${arm.partitions} partition(s), ${WORKERS} workers on simulated:${PROFILE.id} x${DILATION}`);
  const cluster: TestCluster = await startCluster({
    workers: WORKERS,
    presets: ["mini"],
    intake: arm.intake,
    partitions: arm.partitions,
    workerEnv: {
      SHOAL_RUNTIME: `simulated:${PROFILE.id}`,
      SHOAL_SIM_DILATION: String(DILATION),
      SHOAL_INFERENCE_THREADS: "1",
      SHOAL_SIM_LOG_CALLS: "true",
      ...envList(process.env[arm.intake === "share" ? "BENCH_SHARE_ENV" : "BENCH_GROUP_ENV"]),
      ...arm.env,
    },
  });
  current = cluster;
  try {
    const metricsUrls = await Promise.all(
      cluster.workers.map(async (w) => `http://127.0.0.1:${String((await w.waitForLog((l) => l.msg === "worker pulling jobs"))["httpPort"])}/metrics`),
    );
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const call = async (inputs: string[]): Promise<{ worker: string; queueMs: number; inferenceMs: number }> => {
      let worker = "";
      const res = await inference.embed({ model, inputs }, { timeoutMs: 60_000, onHeader: (h) => (worker = h.get("shoal-worker") ?? "") });
      return { worker, queueMs: res.timing?.queueMs ?? 0, inferenceMs: res.timing?.inferenceMs ?? 0 };
    };
    // Every worker joined and serving before the clock starts (group: the last rebalance done).
    for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: 16 }, () => call([texts.get(16)!])));
    await new Promise((r) => setTimeout(r, 1_000));

    const answered: AnsweredJob[] = [];
    const sendLags: number[] = [];
    let failed = 0;
    let inFlight = 0;
    const t0 = Date.now() + 200;
    const from = t0 + WARMUP * 1000;
    const to = t0 + (WARMUP + SECONDS) * 1000;
    let before: Scrape[] = [];
    const beforeAt = setTimeout(() => void Promise.all(metricsUrls.map((u) => scrape(u))).then((s) => (before = s)), from - Date.now());
    let after: Scrape[] = [];
    const afterAt = setTimeout(() => void Promise.all(metricsUrls.map((u) => scrape(u))).then((s) => (after = s)), to - Date.now());
    const progress = setInterval(() => {
      const now = Date.now();
      const shortLat = answered.filter((j) => j.cls === "short" && j.scheduledUnixMs >= now - 5_000).map((j) => j.latencyMs);
      log(
        `   ${arm.name} t=${((now - t0) / 1000).toFixed(0)}s${now < from ? " (warm-up)" : ""}: answered ${answered.length}, in flight ${inFlight}, failed ${failed}, ` +
          `short p50/p99 last 5 s ${percentile(shortLat, 50).toFixed(1)}/${percentile(shortLat, 99).toFixed(1)} ms`,
      );
    }, 5_000);
    const pending: Promise<void>[] = [];
    for (const job of trace) {
      const at = t0 + job.arrivalMs;
      const wait = at - Date.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const shape = shapeOf(job);
      const inputs = shape.tokens.map((n) => texts.get(n)!);
      const sentUnixMs = Date.now();
      sendLags.push(Math.max(0, sentUnixMs - at));
      const t = performance.now();
      inFlight++;
      pending.push(
        call(inputs).then(
          (r) => {
            inFlight--;
            answered.push({ cls: shape.cls, scheduledUnixMs: at, sentUnixMs, latencyMs: performance.now() - t, ...r });
          },
          (err: unknown) => {
            inFlight--;
            failed++;
            if (failed <= 3) log(`   ${arm.name}: a call failed: ${String(err)}`);
          },
        ),
      );
    }
    await Promise.all(pending);
    clearInterval(progress);
    while (after.length === 0 || before.length === 0) await new Promise((r) => setTimeout(r, 100));
    clearTimeout(beforeAt);
    clearTimeout(afterAt);
    const final = await Promise.all(metricsUrls.map((u) => scrape(u)));
    const busy = after.map((a, i) => (workerFigures(a).inferenceS - workerFigures(before[i]!).inferenceS) / SECONDS);
    const lag = final.map((s) => {
      const f = workerFigures(s);
      const verdict = lagVerdict(
        { samples: f.batches, meanLagMs: f.lagMeanMs, maxLagMs: f.lagMaxMs, maxLagFraction: 0, totalLagFraction: f.lagRatio },
        MAX_LAG,
      );
      return { ratio: f.lagRatio, maxMs: f.lagMaxMs, meanMs: f.lagMeanMs, verdict };
    });
    // Each device's runs, from its "simulated run" log lines (all of them: warm-up and drain too).
    const runs = new Map(
      cluster.workers.map((w) => [
        w.name,
        w.logs.filter((l) => l.msg === "simulated run").map((l): Interval => [Number(l["startUnixMs"]), Number(l["startUnixMs"]) + Number(l["ms"])]),
      ]),
    );
    const figures = armFigures(answered, runs, from, to, THRESHOLDS_MS);
    if (process.env["BENCH_DUMP"])
      await writeFile(`${process.env["BENCH_DUMP"]}-${arm.name}.json`, JSON.stringify({ from, to, answered, runs: Object.fromEntries(runs) }));
    log(
      `   ${arm.name}: short p50/p99 ${figures.shortP50.toFixed(1)}/${figures.shortP99.toFixed(1)} ms, long p50/p99 ${figures.longP50.toFixed(0)}/${figures.longP99.toFixed(0)} ms, ` +
        `waited ≥ ${MAIN_THRESHOLD_MS} ms beside an idle worker ${(figures.waitedBesideIdle.get(MAIN_THRESHOLD_MS)! * 100).toFixed(1)}%, ` +
        `busy ${busy.map((b) => b.toFixed(2)).join("/")}, timer lag ${lag.map((l) => `${(l.ratio * 100).toFixed(1)}%`).join("/")}`,
    );
    return { arm, figures, busy, failed, sendLagP99: percentile(sendLags, 99), lag };
  } finally {
    await cluster.stop();
    current = undefined;
  }
}

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);

try {
  log(
    `workload: seed ${SEED}, ${trace.length} jobs over ${WARMUP + SECONDS} s (${windowJobs.length} measured), ` +
      `${((trace.filter((j) => j.model === 0).length / trace.length) * 100).toFixed(0)}% short; mean rate ${(trace.length / (WARMUP + SECONDS)).toFixed(1)} jobs/s, ` +
      `offered load ${realised.toFixed(2)} of ${DEVICES} devices (target ${LOAD}); bursts ${((burstJobs.length / Math.max(1, windowJobs.length)) * 100).toFixed(0)}% of jobs at ${TRACE_SHAPE.burstFactor}x the calm rate; ` +
      `unbatched short ${shortCost.toFixed(1)} ms, long ${longCost.toFixed(0)} ms (simulated:${PROFILE.id} x${DILATION})`,
  );
  const spec = await readModelDir(await ensureModel("mini"));
  const tokenizer = await createTextTokenizer(spec);
  const rand = mulberry32(SEED);
  const texts = new Map<number, string>();
  for (const j of trace) for (const n of j.tokens) if (!texts.has(n)) texts.set(n, textOfTokens(tokenizer, n, rand).text);
  if (!texts.has(16)) texts.set(16, textOfTokens(tokenizer, 16, rand).text);

  const results: ArmResult[] = [];
  for (const arm of arms) results.push(await runArm(arm, texts));

  const refusals = results.flatMap((r) => r.lag.flatMap((l, i) => (l.verdict ? [`${r.arm.name} worker ${i}: ${l.verdict}`] : [])));
  if (refusals.length > 0) {
    console.log(`\nREFUSED: the event loop, not the profile, shaped these latencies (limit --max-lag ${MAX_LAG}):\n${refusals.join("\n")}`);
    process.exitCode = 3;
  } else {
    const shares = results.filter((r) => r.arm.intake === "share");
    const groups = results.filter((r) => r.arm.intake === "group");
    const pairs = shares.flatMap((s) => groups.map((g) => [s, g] as const));
    const pct = (x: number): string => `${(x * 100).toFixed(1)}%`;
    const rows: [string, (r: ArmResult) => number, (x: number) => string][] = [
      ["short p50 ms", (r) => r.figures.shortP50, (x) => x.toFixed(1)],
      ["short p99 ms", (r) => r.figures.shortP99, (x) => x.toFixed(1)],
      ["long p50 ms", (r) => r.figures.longP50, (x) => x.toFixed(0)],
      ["long p99 ms", (r) => r.figures.longP99, (x) => x.toFixed(0)],
      ["throughput jobs/s", (r) => r.figures.jobsPerSecond, (x) => x.toFixed(1)],
      ["busy fraction, mean of workers", (r) => r.busy.reduce((a, b) => a + b, 0) / r.busy.length, (x) => x.toFixed(2)],
      ...THRESHOLDS_MS.map((t): [string, (r: ArmResult) => number, (x: number) => string] => [
        `jobs waited ≥ ${t} ms beside an idle worker`,
        (r) => r.figures.waitedBesideIdle.get(t)!,
        pct,
      ]),
      ["share of all waiting done beside an idle worker", (r) => r.figures.idleOverlapShareOfWait, pct],
      ["time with some worker idle", (r) => r.figures.someIdleFraction, pct],
    ];
    const head = `| figure | ${results.map((r) => r.arm.name).join(" | ")} |${pairs.map(([a, b]) => ` ${a.arm.name} ÷ ${b.arm.name} |`).join("")}`;
    const sep = `|---|${results.map(() => "---:|").join("")}${pairs.map(() => "---:|").join("")}`;
    const blank = pairs.map(() => " |").join("");
    const lines = rows.map(([label, get, fmt]) => {
      const ratios = pairs.map(([a, b]) => (get(b) === 0 ? (get(a) === 0 ? "—" : "∞") : (get(a) / get(b)).toFixed(2)));
      return `| ${label} | ${results.map((r) => fmt(get(r))).join(" | ")} |${ratios.map((x) => ` ${x} |`).join("")}`;
    });
    lines.push(`| busy fraction per worker | ${results.map((r) => r.busy.map((b) => b.toFixed(2)).join(" / ")).join(" | ")} |${blank}`);
    lines.push(`| failed calls | ${results.map((r) => String(r.failed)).join(" | ")} |${blank}`);
    lines.push(`| timer lag, worst worker (Σ lag ÷ Σ planned) | ${results.map((r) => pct(Math.max(...r.lag.map((l) => l.ratio)))).join(" | ")} |${blank}`);
    lines.push(`| client send lag p99 ms | ${results.map((r) => r.sendLagP99.toFixed(1)).join(" | ")} |${blank}`);
    console.log(`
Shoal intake benchmark — seed ${SEED}, ${WORKERS} workers on simulated:${PROFILE.id} x${DILATION} (1 inference thread), 1 gateway, 1 broker;
${SECONDS} s measured per arm after ${WARMUP} s warm-up; ${windowJobs.length} jobs measured, offered load ${realised.toFixed(2)} (target ${LOAD}),
short = 1 text x 16 tokens (${shortCost.toFixed(1)} ms unbatched), long = 8 texts x ~224 tokens (${longCost.toFixed(0)} ms), 80/20 by count,
calm/burst arrivals (bursts ~${TRACE_SHAPE.burstMeanMs} ms at ${TRACE_SHAPE.burstFactor}x the calm rate = ${(realised * BURST_OVER_MEAN).toFixed(2)} of capacity).
Latency: client send → answer. A job "waited beside an idle worker" when its wait (gateway enqueue ≈ client send → start of
the batch that ran it, timing.queue_ms) overlapped by at least the threshold the times when at least one of the ${WORKERS} workers
had no run on its device (each simulated device logs its runs: SHOAL_SIM_LOG_CALLS).

${head}
${sep}
${lines.join("\n")}
`);
  }
} finally {
  await broker?.stop();
}
