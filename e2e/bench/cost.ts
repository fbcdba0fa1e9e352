/**
 * `npm run bench:cost` — what one small request costs on the serving path (issue #17), in one run:
 *  0. the idle background CPU of each component (no requests);
 *  1. CPU ms per request per component (gateway process, worker main thread, the worker's other
 *     threads = inference + ONNX Runtime + libuv/GC, the Kafka broker) at fixed offered loads of
 *     one-text requests, open loop, from /proc CPU counters; the inference itself (the worker's
 *     reported session.run time) separated out;
 *  2. latency the path adds at light load (one request at a time) over a direct in-process
 *     `session.run` of the same text: Connect binary and the OpenAI JSON route;
 *  3. tiny-request throughput at saturation (closed loop, many in flight), against the direct
 *     ceiling of the same inference thread (the same texts in batches of 1, 8 or 32, the best).
 * Prints figures and the goals as ratios; asserts nothing (a benchmark, not a test).
 *
 * Env: KAFKA_BROKERS (default: a scratch broker on a free port), BENCH_SECONDS (10 per load),
 * BENCH_WARMUP_SECONDS (120: one call at a time after the saturated warm-up, see there),
 * BENCH_LOADS (requests/s, default "50,200"), BENCH_CONCURRENCY (saturation, 64), BENCH_PROFILE
 * (a folder: gateway and worker run under --cpu-prof, and their profiles are summarised by
 * package and function at the end — the whole run, warm-up included), BENCH_MODEL (a generator
 * preset, default "mini", or a real embedder's catalog id such as "all-minilm-l6-v2-q", the int8
 * export), BENCH_WORKER_THREADS (the worker's inference threads, 1 intra-op each; default 1, the
 * worker's own default on 2 cores is 2: the direct ceiling then runs as many threads at once).
 */
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureMavenModel, ensureModel, isPresetName } from "@shoal/models";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { createInferenceThreads } from "@shoal/worker/runtime/inference-threads";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { benchBroker } from "./bench-broker.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape } from "../harness/prometheus.ts";
import { jvmCpuMs, mainThreadCpuMs, pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { profileEnv, summarizeProfileDirs } from "./cpuprofile-summary.ts";
import { percentile } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 10);
const LOADS = (process.env["BENCH_LOADS"] ?? "50,200").split(",").map(Number);
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 64);
const LIGHT_WARMUP_SECONDS = Number(process.env["BENCH_WARMUP_SECONDS"] ?? 120);
const MODEL = process.env["BENCH_MODEL"] ?? "mini";
const WORKER_THREADS = Number(process.env["BENCH_WORKER_THREADS"] ?? 1);
const TEXTS = ["a short query", "where is the reef", "kafka share groups", "small models, many of them", "hello there"];

const PROFILE_DIR = process.env["BENCH_PROFILE"];
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);
const brokerPort = Number(process.env["KAFKA_BROKERS"]!.split(",")[0]!.split(":")[1]);

try {
  log(`==> model ${MODEL} and its direct in-process cost`);
  const preset = isPresetName(MODEL);
  const modelDir = preset ? await ensureModel(MODEL) : await ensureMavenModel(MODEL);
  const spec = await readModelDir(modelDir);
  const tokenizer = await createTextTokenizer(spec);
  const threads = await createInferenceThreads({ spec, threads: WORKER_THREADS, intraOpThreads: 1 });
  const direct: number[] = [];
  for (let i = 0; i < 300; i++) {
    const t = performance.now();
    await threads.run([{ ids: [tokenizer.encode(TEXTS[i % TEXTS.length]!, { truncate: true }).ids] }]);
    if (i >= 50) direct.push(performance.now() - t);
  }
  const directP50 = percentile(direct, 50);
  log(`direct tokenize + session.run of one short text: p50 ${directP50.toFixed(2)} ms`);
  // The tiny-request ceiling: the same texts straight into the worker's threads (1 intra-op each,
  // all of them busy at once), one session.run per batch, for the best of a few batch sizes: what
  // the served rate is judged against.
  const tinyCeiling = { textsPerSecond: 0, batch: 0 };
  for (const batch of [1, 8, 32]) {
    let texts = 0;
    const until = performance.now() + 3_000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: WORKER_THREADS }, async () => {
        for (let i = 0; performance.now() < until; i += batch) {
          const ids = Array.from({ length: batch }, (_, k) => tokenizer.encode(TEXTS[(i + k) % TEXTS.length]!, { truncate: true }).ids);
          await threads.run([{ ids }]);
          texts += batch;
        }
      }),
    );
    const rate = texts / ((performance.now() - t0) / 1000);
    log(`direct tiny texts, batch ${batch}: ${rate.toFixed(0)} texts/s`);
    if (rate > tinyCeiling.textsPerSecond) Object.assign(tinyCeiling, { textsPerSecond: rate, batch });
  }
  await threads.close();

  log(`==> starting gateway + worker processes (${WORKER_THREADS} inference thread(s) x 1 intra-op)`);
  const cluster = await startCluster({
    presets: preset ? [MODEL] : [],
    entries: preset ? [] : [{ dir: modelDir, fields: { id: MODEL } }],
    workerEnv: { SHOAL_INFERENCE_THREADS: String(WORKER_THREADS), SHOAL_INTRA_OP_THREADS: "1", ...profileEnv(PROFILE_DIR, "worker") },
    gatewayEnv: profileEnv(PROFILE_DIR, "gateway"),
  });
  current = cluster;
  try {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const gatewayPid = cluster.gateways[0]!.pid;
    const workerPid = cluster.workers[0]!.pid;
    const brokerPid = await pidListeningOn(brokerPort);
    log(`pids: gateway ${gatewayPid}, worker ${workerPid}, broker ${brokerPid ?? "not found"}`);
    const embed = (i: number) =>
      inference.embed({ model, inputs: [TEXTS[i % TEXTS.length]!], options: { encoding: VectorEncoding.FLOAT32_LE } }, { timeoutMs: 30_000 });
    // Warm-up: the JIT of every process (the broker's JVM above all), connections, the model resident.
    log(`==> warm-up: ${CONCURRENCY} in flight for ${SECONDS} s`);
    const warmUntil = performance.now() + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, c) => {
        for (let i = c; performance.now() < warmUntil; i += CONCURRENCY) await embed(i);
      }),
    );
    // The broker's JIT warms per request, not per record: under saturation a Kafka request carries
    // many records, so light load's one-record requests (and the waiting fetches they wake) are
    // still cold after it. `bench:kafka-clients` saw one Produce cost the broker 2.0 ms cold and
    // 0.3 ms after ~4,000 of them. One call at a time for BENCH_WARMUP_SECONDS warms that path.
    log(`==> warm-up: one call at a time for ${LIGHT_WARMUP_SECONDS} s`);
    const lightUntil = performance.now() + LIGHT_WARMUP_SECONDS * 1000;
    let lightCalls = 0;
    while (performance.now() < lightUntil) await embed(lightCalls++);
    log(`   ${lightCalls} calls`);

    const workerLine = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    const workerMetrics = `http://127.0.0.1:${String(workerLine["httpPort"])}/metrics`;
    // Time inside session.run, summed over batches (a job's own timing repeats its batch's).
    const inferenceSeconds = async (): Promise<number> => {
      const { text } = await scrape(workerMetrics);
      return text
        .split("\n")
        .filter((l) => l.startsWith("shoal_worker_inference_seconds_sum"))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    };
    const snapshot = async () => {
      const jvm = brokerPid === undefined ? { total: 0, compiler: 0 } : await jvmCpuMs(brokerPid);
      return {
        inferenceMs: (await inferenceSeconds()) * 1000,
        gateway: await processCpuMs(gatewayPid),
        workerMain: await mainThreadCpuMs(workerPid),
        worker: await processCpuMs(workerPid),
        broker: jvm.total,
        brokerJit: jvm.compiler,
      };
    };

    log(`==> 0/3 idle: ${SECONDS} s with no requests (the background every component burns)`);
    const idleBefore = await snapshot();
    const tIdle = performance.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const idleAfter = await snapshot();
    const idleSeconds = (performance.now() - tIdle) / 1000;
    const idlePerSecond = {
      gateway: (idleAfter.gateway - idleBefore.gateway) / idleSeconds,
      "worker main thread": (idleAfter.workerMain - idleBefore.workerMain) / idleSeconds,
      "worker other threads (inference, ORT, GC)": (idleAfter.worker - idleAfter.workerMain - (idleBefore.worker - idleBefore.workerMain)) / idleSeconds,
      broker: (idleAfter.broker - idleBefore.broker) / idleSeconds,
    };
    const idleBrokerJit = (idleAfter.brokerJit - idleBefore.brokerJit) / idleSeconds;

    interface LoadRow {
      offered: number;
      answered: number;
      failed: number;
      seconds: number;
      perRequest: Record<string, number>;
      /** The same less the idle background over the phase's duration. */
      marginal: Record<string, number>;
      inferenceMs: number;
      /** Of the broker's CPU per request, its JIT compiler threads' (still warming, not per-request work). */
      brokerJit: number;
      p50: number;
      p99: number;
    }
    const rows: LoadRow[] = [];
    for (const [k, rate] of LOADS.entries()) {
      log(`==> 1/3 load ${k + 1}/${LOADS.length}: ${rate} one-text requests/s for ${SECONDS} s (open loop)`);
      const before = await snapshot();
      const t0 = performance.now();
      const total = Math.round(rate * SECONDS);
      const latencies: number[] = [];
      let failed = 0;
      const calls: Promise<void>[] = [];
      for (let i = 0; i < total; i++) {
        const due = t0 + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        const start = performance.now();
        calls.push(
          embed(i).then(
            () => {
              latencies.push(performance.now() - start);
            },
            () => {
              failed++;
            },
          ),
        );
        if (i % Math.max(1, rate * 2) === 0 && i > 0) log(`   ${(i / rate).toFixed(0)} s: ${latencies.length} answered`);
      }
      await Promise.all(calls);
      const seconds = (performance.now() - t0) / 1000;
      const after = await snapshot();
      const n = latencies.length;
      const workerOther = after.worker - after.workerMain - (before.worker - before.workerMain);
      const perRequest: Record<string, number> = {
        gateway: (after.gateway - before.gateway) / n,
        "worker main thread": (after.workerMain - before.workerMain) / n,
        "worker other threads (inference, ORT, GC)": workerOther / n,
        broker: (after.broker - before.broker) / n,
      };
      const marginal = Object.fromEntries(Object.entries(perRequest).map(([k, v]) => [k, v - (idlePerSecond[k as keyof typeof idlePerSecond] * seconds) / n]));
      rows.push({
        marginal,
        offered: rate,
        answered: n,
        failed,
        seconds,
        perRequest,
        inferenceMs: (after.inferenceMs - before.inferenceMs) / n,
        brokerJit: (after.brokerJit - before.brokerJit) / n,
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
      });
    }

    log("==> 2/3 light load: 300 sequential requests, Connect binary and OpenAI JSON");
    const connect: number[] = [];
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      await embed(i);
      connect.push(performance.now() - t);
    }
    const openai: number[] = [];
    for (let i = 0; i < 300; i++) {
      const t = performance.now();
      const res = await fetch(`${cluster.urls[0]}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, input: TEXTS[i % TEXTS.length] }),
      });
      await res.json();
      openai.push(performance.now() - t);
    }

    log(`==> 3/3 saturation: ${CONCURRENCY} one-text requests in flight for ${SECONDS} s`);
    let answered = 0;
    const stopAt = performance.now() + SECONDS * 1000;
    const t1 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, c) => {
        for (let i = c; performance.now() < stopAt; i += CONCURRENCY) {
          await embed(i);
          answered++;
        }
      }),
    );
    const tinyRps = answered / ((performance.now() - t1) / 1000);

    const fmt = (x: number): string => x.toFixed(2);
    const topMessages = (logs: readonly { msg?: string }[]) => {
      const counts = new Map<string, number>();
      for (const l of logs) counts.set(String(l.msg), (counts.get(String(l.msg)) ?? 0) + 1);
      return [...counts.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([m, n]) => `${n}× "${m.slice(0, 60)}"`)
        .join(", ");
    };
    log(
      `log lines: gateway ${cluster.gateways[0]!.logs.length} (${topMessages(cluster.gateways[0]!.logs)}), worker ${cluster.workers[0]!.logs.length} (${topMessages(cluster.workers[0]!.logs)})`,
    );
    console.log(
      `\nShoal cost benchmark — model ${model} (${preset ? "generated" : "real export"}), 1 gateway, 1 worker (${WORKER_THREADS} inference thread(s) x 1 intra-op), 1 broker, one machine (${(await import("node:os")).cpus().length} cores)`,
    );
    console.log(`direct in-process tokenize + session.run, one short text: p50 ${fmt(directP50)} ms`);
    console.log(
      `idle background, CPU ms per second: ${Object.entries(idlePerSecond)
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(", ")} (of the broker's, its JIT compiler ${idleBrokerJit.toFixed(0)})\n`,
    );
    const names = Object.keys(rows[0]!.perRequest);
    console.log(`| CPU ms per request | ${rows.map((r) => `${r.offered} req/s offered`).join(" | ")} |`);
    console.log(`| --- | ${rows.map(() => "---").join(" | ")} |`);
    for (const name of names) console.log(`| ${name} | ${rows.map((r) => fmt(r.perRequest[name]!)).join(" | ")} |`);
    console.log(`| of the broker's, its JIT compiler (warm-up left over) | ${rows.map((r) => fmt(r.brokerJit)).join(" | ")} |`);
    console.log(`| of which inference (session.run, worker metric) | ${rows.map((r) => fmt(r.inferenceMs)).join(" | ")} |`);
    // session.run runs on the worker's inference thread with 1 intra-op thread: its wall time is its
    // CPU time on an idle machine. On a busy one (other processes on the cores) wall time counts
    // the waits for a core too, so the headline charges every CPU counter but the worker's other
    // threads (inference, ORT, GC: all inference but a little GC and libuv) to the path instead.
    const OTHER = "worker other threads (inference, ORT, GC)";
    const outside = (m: Record<string, number>): number => Object.entries(m).reduce((a, [k, v]) => (k === OTHER ? a : a + v), 0);
    const byMetric = rows.map((r) => Object.values(r.perRequest).reduce((a, b) => a + b, 0) - r.inferenceMs);
    console.log(`| path CPU excluding inference as the worker's metric times it (wall) | ${byMetric.map(fmt).join(" | ")} |`);
    const pathCpu = rows.map((r) => outside(r.perRequest));
    console.log(`| **path CPU excluding inference (gateway + worker main thread + broker)** | ${pathCpu.map((x) => `**${fmt(x)}**`).join(" | ")} |`);
    console.log(`| the same less the broker's JIT compiler | ${rows.map((r, k) => fmt(pathCpu[k]! - r.brokerJit)).join(" | ")} |`);
    const marginalPath = rows.map((r) => outside(r.marginal));
    console.log(`| path CPU excluding inference and the idle background (marginal) | ${marginalPath.map(fmt).join(" | ")} |`);
    console.log(`| answered / failed | ${rows.map((r) => `${r.answered} / ${r.failed}`).join(" | ")} |`);
    console.log(`| latency p50 / p99 ms | ${rows.map((r) => `${fmt(r.p50)} / ${fmt(r.p99)}`).join(" | ")} |`);
    const addConnect = percentile(connect, 50) - directP50;
    const addOpenai = percentile(openai, 50) - directP50;
    console.log(`
| goal | measured | ratio (goal ÷ measured, ≥ 1 meets it) |
| --- | --- | --- |
| path CPU excl. inference ≤ 1 ms/request at ${rows[0]!.offered} req/s | ${fmt(pathCpu[0]!)} ms (marginal ${fmt(marginalPath[0]!)}) | ${fmt(1 / pathCpu[0]!)} |
| added latency p50 ≤ 3 ms, Connect binary (p99 ${fmt(percentile(connect, 99) - directP50)}) | ${fmt(addConnect)} ms | ${fmt(3 / addConnect)} |
| added latency p50 ≤ 5 ms, OpenAI JSON (p99 ${fmt(percentile(openai, 99) - directP50)}) | ${fmt(addOpenai)} ms | ${fmt(5 / addOpenai)} |
| tiny 1-text requests ≥ 1,000 req/s (${CONCURRENCY} in flight) | ${tinyRps.toFixed(0)} req/s | ${fmt(tinyRps / 1000)} |

tiny requests served ÷ the direct ceiling of the same ${WORKER_THREADS} inference thread(s), model ${MODEL} (${tinyCeiling.textsPerSecond.toFixed(0)} texts/s at batch ${tinyCeiling.batch}): ${fmt(tinyRps / tinyCeiling.textsPerSecond)}
`);
  } finally {
    await cluster.stop();
  }
  if (PROFILE_DIR !== undefined) for (const summary of await summarizeProfileDirs(PROFILE_DIR, ["gateway", "worker"])) console.log(`\n${summary}`);
} finally {
  await broker?.stop();
}
