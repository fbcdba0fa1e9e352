/**
 * `npm run bench:overhead` — what the serving path costs, measured in one run on this machine:
 *  1. raw ONNX Runtime `session.run()` useful tokens/s on the default model, for the same ragged
 *     batches the worker forms (same padding plan), in-process;
 *  2. sustained useful tokens/s through gateway → Kafka → worker → reply, requests of 8 texts with
 *     lengths uniform over 8–128 tokens, closed loop;
 *  3. latency the path adds at light load (one request at a time): end to end minus inference.
 * Prints figures and ratios; asserts nothing (a benchmark, not a test).
 *
 * Clients ask for VECTOR_ENCODING_FLOAT32_LE, the encoding meant for bulk use, unless
 * BENCH_ENCODING=values: the default encoding (repeated float), what a gRPC client gets when it
 * asks for nothing.
 *
 * Env: KAFKA_BROKERS (default: a scratch broker on a free port), BENCH_SECONDS (30), BENCH_CONCURRENCY (16),
 * BENCH_ENCODING (float32_le | values).
 */
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel } from "@shoal/models";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { DEFAULT_BATCH_MAX_TOKENS } from "@shoal/worker/batching/batcher";
import { measureRawMixed } from "@shoal/worker/runtime/raw-ceiling";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { startCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { percentile, raggedRequests } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 30);
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 16);
const INTRA_OP = 2;
const ENCODING_NAME = process.env["BENCH_ENCODING"] ?? "float32_le";
if (ENCODING_NAME !== "float32_le" && ENCODING_NAME !== "values") throw new Error(`BENCH_ENCODING must be float32_le or values, not ${ENCODING_NAME}`);
const ENCODING = ENCODING_NAME === "values" ? VectorEncoding.UNSPECIFIED : VectorEncoding.FLOAT32_LE;
// The served worker's layout (default: the ceiling's, 1 thread x 2 intra-op); BENCH_WORKER_THREADS=2
// BENCH_WORKER_INTRA_OP=1 measures the worker's default on 2 cores against the same ceiling.
const WORKER_THREADS = process.env["BENCH_WORKER_THREADS"] ?? "1";
const WORKER_INTRA_OP = process.env["BENCH_WORKER_INTRA_OP"] ?? String(INTRA_OP);

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

let broker: ScratchBroker | undefined;
if (!process.env["KAFKA_BROKERS"]) {
  broker = await startScratchBroker();
  process.env["KAFKA_BROKERS"] = broker.brokers;
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
  let current: number[] = [];
  for (const r of requests.slice(0, 120)) {
    if (current.length > 0 && current.reduce((a, b) => a + b, 0) + r.tokens.reduce((a, b) => a + b, 0) > DEFAULT_BATCH_MAX_TOKENS) {
      batches.push(current);
      current = [];
    }
    current.push(...r.tokens);
  }
  if (current.length > 0) batches.push(current);

  log(`==> 1/3 raw session.run on ${batches.length} ragged batches (${INTRA_OP} intra-op threads)`);
  const raw = await measureRawMixed(spec, batches, { perCallOverheadTokens: 64, maxItemsPerCall: 128, iterations: 2, intraOpThreads: INTRA_OP });
  log(`raw: ${raw.usefulTokensPerSecond.toFixed(0)} useful tokens/s (useful fraction ${raw.usefulFraction.toFixed(3)})`);

  log("==> starting gateway + worker processes");
  const cluster = await startCluster({
    presets: ["mini"],
    partitions: 8,
    workerEnv: { SHOAL_INFERENCE_THREADS: WORKER_THREADS, SHOAL_INTRA_OP_THREADS: WORKER_INTRA_OP, LOG_LEVEL: process.env["BENCH_WORKER_LOG"] ?? "info" },
  });
  try {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");

    log(`==> 2/3 sustained load: ${CONCURRENCY} requests in flight for ${SECONDS}s (+5s warm-up)`);
    let next = 0;
    let usefulTokens = 0;
    let answered = 0;
    let counting = false;
    let stopAt = Date.now() + 5_000 + SECONDS * 1_000;
    const warmEnd = Date.now() + 5_000;
    const loop = async (): Promise<void> => {
      while (Date.now() < stopAt) {
        const r = requests[next++ % requests.length]!;
        const res = await inference.embed({ model, inputs: r.texts, options: { encoding: ENCODING } }, { timeoutMs: 60_000 });
        if (counting) {
          usefulTokens += res.usage?.promptTokens ?? 0;
          answered += 1;
        }
      }
    };
    let t0 = 0;
    const progress = setInterval(() => {
      if (!counting && Date.now() >= warmEnd) {
        counting = true;
        t0 = performance.now();
        stopAt = Date.now() + SECONDS * 1_000;
        log("   warm-up done, measuring");
      } else if (counting) {
        log(
          `   ${((performance.now() - t0) / 1000).toFixed(0)}s: ${(usefulTokens / ((performance.now() - t0) / 1000)).toFixed(0)} useful tokens/s, ${answered} requests`,
        );
      }
    }, 5_000);
    await Promise.all(Array.from({ length: CONCURRENCY }, loop));
    clearInterval(progress);
    const servedSeconds = (performance.now() - t0) / 1000;
    const batchLines = cluster.workers[0]!.logs.filter((l) => l.msg === "batch done");
    if (batchLines.length > 0) {
      const busy = batchLines.reduce((n, l) => n + Number(l["ms"]), 0) / 1000;
      log(`   worker: ${batchLines.length} batches, ${busy.toFixed(1)}s in session.run over the whole run`);
    }
    const served = usefulTokens / servedSeconds;

    log("==> 3/3 light load: 200 sequential requests");
    const added: number[] = [];
    const e2e: number[] = [];
    for (let i = 0; i < 200; i++) {
      const r = requests[i % requests.length]!;
      const t = performance.now();
      const res = await inference.embed({ model, inputs: r.texts, options: { encoding: ENCODING } });
      const ms = performance.now() - t;
      e2e.push(ms);
      added.push(ms - (res.timing?.inferenceMs ?? 0));
    }
    const single: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      const res = await inference.embed({ model, inputs: ["a short query"], options: { encoding: ENCODING } });
      single.push(performance.now() - t - (res.timing?.inferenceMs ?? 0));
    }

    const row = (k: string, v: string): string => `| ${k.padEnd(58)} | ${v.padStart(14)} |`;
    console.log(`
Shoal overhead benchmark — model ${model}, vectors as ${ENCODING_NAME}, 1 worker (${WORKER_THREADS} inference thread(s) x ${WORKER_INTRA_OP} intra-op; raw: 1 x ${INTRA_OP}), 1 gateway, 1 broker, one 2-core machine
${row("figure", "value")}
${row("raw session.run useful tokens/s (same batches, in-process)", raw.usefulTokensPerSecond.toFixed(0))}
${row("served useful tokens/s (gateway→Kafka→worker→reply)", served.toFixed(0))}
${row("served / raw", (served / raw.usefulTokensPerSecond).toFixed(3))}
${row("padding plan useful fraction", raw.usefulFraction.toFixed(3))}
${row(`requests answered in ${servedSeconds.toFixed(0)}s at concurrency ${CONCURRENCY}`, String(answered))}
${row("light load, 8 texts: added latency p50 ms (e2e − inference)", percentile(added, 50).toFixed(2))}
${row("light load, 8 texts: added latency p99 ms", percentile(added, 99).toFixed(2))}
${row("light load, 8 texts: end-to-end p50 ms", percentile(e2e, 50).toFixed(2))}
${row("light load, 1 short text: added latency p50 ms", percentile(single, 50).toFixed(2))}
${row("light load, 1 short text: added latency p99 ms", percentile(single, 99).toFixed(2))}
`);
  } finally {
    await cluster.stop();
  }
} finally {
  await broker?.stop();
}
