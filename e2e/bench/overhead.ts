/**
 * `npm run bench:overhead` — what the serving path costs, measured in one run on this machine:
 *  1. raw ONNX Runtime `session.run()` useful tokens/s on the default model, for the same ragged
 *     batches the worker forms (same padding plan): one session on every core in-process, and the
 *     worker's own layout (its inference threads, all busy at once), before and after the served
 *     phase, so a machine that slows down or speeds up meanwhile weighs on both sides alike;
 *  2. sustained useful tokens/s through gateway → Kafka → worker → reply, requests of 8 texts with
 *     lengths uniform over 8–128 tokens, closed loop, measured after a warm-up that lasts until the
 *     broker's JIT compiler has gone quiet (its C1/C2 threads take a tenth of two cores at first and
 *     still 30–55 CPU ms/s after 90 s of this load), with the CPU each process used meanwhile, from
 *     /proc (the broker's split into its JIT compiler, its collector and the rest), and the batches
 *     the worker ran meanwhile, from its metrics;
 *  3. latency the path adds at light load (one request at a time): end to end minus inference.
 * The ceiling is the faster layout's mean of its before and after figures. Prints figures and
 * ratios; asserts nothing (a benchmark, not a test).
 *
 * Clients ask for VECTOR_ENCODING_FLOAT32_LE, the encoding meant for bulk use, unless
 * BENCH_ENCODING=values: the default encoding (repeated float), what a gRPC client gets when it
 * asks for nothing.
 *
 * Env: KAFKA_BROKERS (default: a scratch broker on a free port), BENCH_SECONDS (30, measured),
 * BENCH_WARMUP_SECONDS (90, the least warm-up), BENCH_JIT_QUIET (10: warm-up goes on until the
 * broker's JIT compiler used under this many CPU ms/s in each of the last four 5 s ticks),
 * BENCH_WARMUP_MAX_SECONDS (420, the most warm-up), BENCH_CONCURRENCY (16), BENCH_ENCODING
 * (float32_le | values), BENCH_WORKER_THREADS and BENCH_WORKER_INTRA_OP (the worker's layout;
 * default its own defaults for this machine's cores), BENCH_PROFILE (a folder: gateway and worker
 * run under --cpu-prof, their profiles summarised by package and function at the end; the whole
 * run, warm-up included).
 */
import { availableParallelism } from "node:os";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { ensureModel } from "@shoal/models";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { DEFAULT_BATCH_MAX_TOKENS } from "@shoal/worker/batching/batcher";
import { loadWorkerConfig } from "@shoal/worker/config";
import { measureRawMixed, measureRawMixedThreads } from "@shoal/worker/runtime/raw-ceiling";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { benchBroker } from "./bench-broker.ts";
import { jvmCpuMs, mainThreadCpuMs, pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { histogramCount, histogramSum, scrape, total } from "../harness/prometheus.ts";
import { profileEnv, summarizeProfileDirs } from "./cpuprofile-summary.ts";
import { percentile, raggedRequests } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 30);
const WARMUP_SECONDS = Number(process.env["BENCH_WARMUP_SECONDS"] ?? 90);
// The broker's JIT compiler is still busy long after 90 s of this load on two cores (C2 at 30-55
// CPU ms/s, half the broker's CPU, until about 200 s): warm-up goes on until it has been quiet.
const JIT_QUIET_MS_PER_S = Number(process.env["BENCH_JIT_QUIET"] ?? 10);
const WARMUP_MAX_SECONDS = Number(process.env["BENCH_WARMUP_MAX_SECONDS"] ?? 420);
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 16);
const CORES = availableParallelism();
const PROFILE_DIR = process.env["BENCH_PROFILE"];
const ENCODING_NAME = process.env["BENCH_ENCODING"] ?? "float32_le";
if (ENCODING_NAME !== "float32_le" && ENCODING_NAME !== "values") throw new Error(`BENCH_ENCODING must be float32_le or values, not ${ENCODING_NAME}`);
const ENCODING = ENCODING_NAME === "values" ? VectorEncoding.UNSPECIFIED : VectorEncoding.FLOAT32_LE;
// The served worker's layout: its own defaults unless named, read through its own config reader.
const LAYOUT_ENV: Record<string, string> = {
  ...(process.env["BENCH_WORKER_THREADS"] ? { SHOAL_INFERENCE_THREADS: process.env["BENCH_WORKER_THREADS"] } : {}),
  ...(process.env["BENCH_WORKER_INTRA_OP"] ? { SHOAL_INTRA_OP_THREADS: process.env["BENCH_WORKER_INTRA_OP"] } : {}),
};
const { inferenceThreads: WORKER_THREADS, intraOpThreads: WORKER_INTRA_OP } = loadWorkerConfig({ SHOAL_CATALOG: "(unused)", ...LAYOUT_ENV });
const PLAN = { perCallOverheadTokens: 64, maxItemsPerCall: 128, iterations: 2 };

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);
const brokerPort = Number(process.env["KAFKA_BROKERS"]!.split(",")[0]!.split(":")[1]);

interface Ceilings {
  /** One session with every core's intra-op thread, in this process. */
  readonly single: number;
  /** The worker's layout through its inference threads; undefined when it is the single session's. */
  readonly worker: number | undefined;
}

const sameLayout = WORKER_THREADS === 1 && WORKER_INTRA_OP === CORES;

async function ceilings(spec: ModelSpec, batches: readonly number[][], when: string): Promise<Ceilings> {
  const single = (await measureRawMixed(spec, batches, { ...PLAN, intraOpThreads: CORES })).usefulTokensPerSecond;
  log(`   raw ${when}, 1 session x ${CORES} intra-op: ${single.toFixed(0)} useful tokens/s`);
  if (sameLayout) return { single, worker: undefined };
  const worker = (await measureRawMixedThreads(spec, batches, { ...PLAN, threads: WORKER_THREADS, intraOpThreads: WORKER_INTRA_OP })).usefulTokensPerSecond;
  log(`   raw ${when}, the worker's ${WORKER_THREADS} threads x ${WORKER_INTRA_OP} intra-op: ${worker.toFixed(0)} useful tokens/s`);
  return { single, worker };
}

/** The worker's batch counters, summed over models. */
async function batchCounters(metricsUrl: string): Promise<Record<string, number>> {
  const s = await scrape(metricsUrl);
  return {
    batches: histogramCount(s, "shoal_worker_batch_tokens"),
    usefulTokens: histogramSum(s, "shoal_worker_batch_tokens"),
    paddedTokens: total(s, "shoal_worker_padded_tokens_total"),
    closedFull: total(s, "shoal_worker_batches_total", { reason: "full" }),
  };
}

/** CPU ms of each process of the path, and of this driver. */
async function cpuNow(pids: { gateway: number; worker: number; broker: number | undefined }): Promise<Record<string, number>> {
  const [gateway, worker, workerMain, brokerMs] = await Promise.all([
    processCpuMs(pids.gateway),
    processCpuMs(pids.worker),
    mainThreadCpuMs(pids.worker),
    pids.broker === undefined ? Promise.resolve({ total: Number.NaN, compiler: Number.NaN, gc: Number.NaN }) : jvmCpuMs(pids.broker),
  ]);
  const self = process.cpuUsage();
  return {
    gateway,
    workerMain,
    workerOther: worker - workerMain,
    broker: brokerMs.total,
    brokerJit: brokerMs.compiler,
    brokerGc: brokerMs.gc,
    driver: (self.user + self.system) / 1000,
  };
}

try {
  log("==> default model (mini)");
  const spec = await readModelDir(await ensureModel("mini"));
  const tokenizer = await createTextTokenizer(spec);
  const requests = raggedRequests(tokenizer, { count: 400, perRequest: 8, minTokens: 8, maxTokens: 128, seed: 42 });
  const meanTokens = requests.reduce((n, r) => n + r.tokens.reduce((a, b) => a + b, 0), 0) / requests.length;
  log(`workload: ${requests.length} distinct requests x 8 texts, ${meanTokens.toFixed(0)} tokens/request on average`);

  // The batches the worker forms under load: requests in arrival order up to the token budget.
  const batches: number[][] = [];
  let forming: number[] = [];
  for (const r of requests.slice(0, 120)) {
    if (forming.length > 0 && forming.reduce((a, b) => a + b, 0) + r.tokens.reduce((a, b) => a + b, 0) > DEFAULT_BATCH_MAX_TOKENS) {
      batches.push(forming);
      forming = [];
    }
    forming.push(...r.tokens);
  }
  if (forming.length > 0) batches.push(forming);

  log(`==> 1/4 raw session.run on ${batches.length} ragged batches, before`);
  const before = await ceilings(spec, batches, "before");

  log(`==> starting gateway + worker processes (the worker: ${WORKER_THREADS} inference thread(s) x ${WORKER_INTRA_OP} intra-op)`);
  const cluster = await startCluster({
    presets: ["mini"],
    partitions: 8,
    workerEnv: {
      SHOAL_INFERENCE_THREADS: String(WORKER_THREADS),
      SHOAL_INTRA_OP_THREADS: String(WORKER_INTRA_OP),
      LOG_LEVEL: process.env["BENCH_WORKER_LOG"] ?? "info",
      ...profileEnv(PROFILE_DIR, "worker"),
    },
    gatewayEnv: profileEnv(PROFILE_DIR, "gateway"),
  });
  current = cluster;
  let served = 0;
  let answered = 0;
  let servedSeconds = 0;
  let warmedSeconds = 0;
  let batchesServed: Record<string, number> = {};
  let cpu: Record<string, number> = {};
  const added: number[] = [];
  const e2e: number[] = [];
  const single: number[] = [];
  try {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const workerLine = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    const workerMetrics = `http://127.0.0.1:${String(workerLine["httpPort"])}/metrics`;
    let batchesAtCount: Record<string, number> = {};
    const pids = { gateway: cluster.gateways[0]!.pid, worker: cluster.workers[0]!.pid, broker: await pidListeningOn(brokerPort) };

    log(
      `==> 2/4 sustained load: ${CONCURRENCY} requests in flight, at least ${WARMUP_SECONDS} s of warm-up and until the broker's JIT compiler has used under ${JIT_QUIET_MS_PER_S} CPU ms/s for 20 s (at most ${WARMUP_MAX_SECONDS} s), then ${SECONDS} s measured`,
    );
    let next = 0;
    let usefulTokens = 0;
    let counting = false;
    const t0 = performance.now();
    const warmEnd = t0 + WARMUP_SECONDS * 1_000;
    const warmMaxEnd = t0 + Math.max(WARMUP_SECONDS, WARMUP_MAX_SECONDS) * 1_000;
    let stopAt = Number.POSITIVE_INFINITY;
    let tCount = warmEnd;
    let cpuAtCount: Record<string, number> = {};
    const loop = async (): Promise<void> => {
      while (performance.now() < stopAt) {
        const r = requests[next++ % requests.length]!;
        const res = await inference.embed({ model, inputs: r.texts, options: { encoding: ENCODING } }, { timeoutMs: 60_000 });
        if (counting) {
          usefulTokens += res.usage?.promptTokens ?? 0;
          answered += 1;
        }
      }
    };
    // Every 5 s: the rate so far, and the broker's CPU and its JIT compiler's over the last 5 s.
    const brokerNow = async (): Promise<{ total: number; compiler: number }> =>
      pids.broker === undefined ? { total: Number.NaN, compiler: 0 } : await jvmCpuMs(pids.broker);
    let last = { ...(await brokerNow()), at: performance.now() };
    const jitRates: number[] = [];
    const progress = setInterval(() => {
      void (async () => {
        const now = performance.now();
        const b = await brokerNow();
        const brokerRate = ((b.total - last.total) / (now - last.at)) * 1000;
        const jitRate = ((b.compiler - last.compiler) / (now - last.at)) * 1000;
        last = { ...b, at: now };
        jitRates.push(jitRate);
        const jitQuiet = jitRates.length >= 4 && jitRates.slice(-4).every((r) => r < JIT_QUIET_MS_PER_S);
        if (!counting && now >= warmEnd && (jitQuiet || now >= warmMaxEnd)) {
          counting = true;
          tCount = now;
          stopAt = now + SECONDS * 1_000;
          [cpuAtCount, batchesAtCount] = await Promise.all([cpuNow(pids), batchCounters(workerMetrics)]);
          warmedSeconds = (now - t0) / 1000;
          log(
            `   warm-up done after ${warmedSeconds.toFixed(0)} s${jitQuiet ? "" : " (the broker's JIT still busy: BENCH_WARMUP_MAX_SECONDS reached)"}, measuring`,
          );
        } else {
          const phase = counting
            ? `${((now - tCount) / 1000).toFixed(0)}s measured: ${(usefulTokens / ((now - tCount) / 1000)).toFixed(0)} useful tokens/s`
            : `${((now - t0) / 1000).toFixed(0)}s warm-up`;
          log(`   ${phase}; broker ${brokerRate.toFixed(0)} CPU ms/s, of it its JIT compiler ${jitRate.toFixed(0)}`);
        }
      })();
    }, 5_000);
    await Promise.all(Array.from({ length: CONCURRENCY }, loop));
    clearInterval(progress);
    servedSeconds = (performance.now() - tCount) / 1000;
    const [cpuAtEnd, batchesAtEnd] = await Promise.all([cpuNow(pids), batchCounters(workerMetrics)]);
    batchesServed = Object.fromEntries(Object.entries(batchesAtEnd).map(([k, v]) => [k, v - (batchesAtCount[k] ?? Number.NaN)]));
    cpu = Object.fromEntries(Object.entries(cpuAtEnd).map(([k, v]) => [k, (v - (cpuAtCount[k] ?? Number.NaN)) / servedSeconds]));
    served = usefulTokens / servedSeconds;

    log("==> 3/4 light load: 200 sequential requests");
    for (let i = 0; i < 200; i++) {
      const r = requests[i % requests.length]!;
      const t = performance.now();
      const res = await inference.embed({ model, inputs: r.texts, options: { encoding: ENCODING } });
      const ms = performance.now() - t;
      e2e.push(ms);
      added.push(ms - (res.timing?.inferenceMs ?? 0));
    }
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      const res = await inference.embed({ model, inputs: ["a short query"], options: { encoding: ENCODING } });
      single.push(performance.now() - t - (res.timing?.inferenceMs ?? 0));
    }
  } finally {
    await cluster.stop();
    current = undefined;
  }

  log("==> 4/4 raw session.run again, after");
  const after = await ceilings(spec, batches, "after");
  const mean = (a: number, b: number): number => (a + b) / 2;
  const singleCeiling = mean(before.single, after.single);
  const workerCeiling = before.worker === undefined || after.worker === undefined ? undefined : mean(before.worker, after.worker);
  const ceiling = Math.max(singleCeiling, workerCeiling ?? 0);
  const nonInference = (cpu["gateway"] ?? 0) + (cpu["workerMain"] ?? 0) + (cpu["broker"] ?? 0) + (cpu["driver"] ?? 0);

  const row = (k: string, v: string): string => `| ${k.padEnd(74)} | ${v.padStart(16)} |`;
  const ms = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? "n/a" : x.toFixed(0));
  console.log(`
Shoal overhead benchmark — model shoal-minilm-l6, vectors as ${ENCODING_NAME}, 1 worker (${WORKER_THREADS} inference thread(s) x ${WORKER_INTRA_OP} intra-op), 1 gateway, 1 broker, one ${CORES}-core machine
${row("figure", "value")}
${row(`raw useful tokens/s, 1 session x ${CORES} intra-op, before / after`, `${before.single.toFixed(0)} / ${after.single.toFixed(0)}`)}
${
  sameLayout
    ? ""
    : `${row(`raw useful tokens/s, the worker's ${WORKER_THREADS} x ${WORKER_INTRA_OP}, before / after`, `${before.worker!.toFixed(0)} / ${after.worker!.toFixed(0)}`)}
`
}${row("ceiling: the faster layout, mean of before and after", ceiling.toFixed(0))}
${row(`served useful tokens/s, ${SECONDS} s after ${warmedSeconds.toFixed(0)} s of warm-up`, served.toFixed(0))}
${row("**served / ceiling**", (served / ceiling).toFixed(3))}
${row(`served / (ceiling × the worker process's share of the ${CORES} cores): the worker on a host of its own`, (served / ((ceiling * ((cpu["workerMain"] ?? 0) + (cpu["workerOther"] ?? 0))) / (CORES * 1000))).toFixed(3))}
${row(`served / raw 1 x ${CORES} (the single session's mean)`, (served / singleCeiling).toFixed(3))}
${row("batches while measured (closed full), mean useful tokens per batch", `${batchesServed["batches"]} (${batchesServed["closedFull"]}), ${((batchesServed["usefulTokens"] ?? 0) / (batchesServed["batches"] ?? 1)).toFixed(0)}`)}
${row("the ceiling's batches (the token budget filled), mean useful tokens per batch", `${batches.length}, ${(batches.flat().reduce((a, b) => a + b, 0) / batches.length).toFixed(0)}`)}
${row("padding while measured (padded share of the tokens computed)", (1 - (batchesServed["usefulTokens"] ?? 0) / (batchesServed["paddedTokens"] ?? 1)).toFixed(3))}
${row(`requests answered in ${servedSeconds.toFixed(0)}s at concurrency ${CONCURRENCY}`, String(answered))}
${row("CPU ms/s while measured: gateway / worker main thread / broker / driver", `${ms(cpu["gateway"])} / ${ms(cpu["workerMain"])} / ${ms(cpu["broker"])} / ${ms(cpu["driver"])}`)}
${row("CPU ms/s while measured: the broker's JIT compiler / its garbage collector", `${ms(cpu["brokerJit"])} / ${ms(cpu["brokerGc"])}`)}
${row("CPU ms/s while measured: the worker's other threads (inference, GC, I/O)", ms(cpu["workerOther"]))}
${row(`CPU ms/s while measured: none of these (idle, or other processes), of ${CORES * 1000}`, ms(CORES * 1000 - nonInference - (cpu["workerOther"] ?? 0)))}
${row(`the path's share of the ${CORES} cores (the four above ÷ ${CORES * 1000} ms/s)`, (nonInference / (CORES * 1000)).toFixed(3))}
${row("light load, 8 texts: added latency p50 ms (e2e − inference)", percentile(added, 50).toFixed(2))}
${row("light load, 8 texts: added latency p99 ms", percentile(added, 99).toFixed(2))}
${row("light load, 8 texts: end-to-end p50 ms", percentile(e2e, 50).toFixed(2))}
${row("light load, 1 short text: added latency p50 ms", percentile(single, 50).toFixed(2))}
${row("light load, 1 short text: added latency p99 ms", percentile(single, 99).toFixed(2))}
`);
  if (PROFILE_DIR !== undefined) for (const summary of await summarizeProfileDirs(PROFILE_DIR, ["gateway", "worker"])) console.log(`\n${summary}`);
} finally {
  await broker?.stop();
}
