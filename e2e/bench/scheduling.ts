/**
 * `npm run bench:scheduling` — the scheduler's figures, measured in one run on this machine
 * (MiniLM-shaped model, 1 worker, 1 gateway, 1 broker):
 *  1. useful-token fraction (1 − padding) of what the worker actually ran, for the fixed-window
 *     policy vs token-budget, on the same ragged load (8 texts of 8–128 tokens per request);
 *  2. interactive p99 latency alone vs with the batch lane saturated by long inputs, with one
 *     inference thread of 2 intra-op threads, then with two threads of one, one kept for
 *     interactive work (SHOAL_INTERACTIVE_RESERVE);
 *  3. total useful tokens/s of the same mixed load with lanes vs everything on one queue (two threads).
 * Prints figures and ratios; asserts nothing.
 *
 * Env: KAFKA_BROKERS (default: a scratch broker), BENCH_SECONDS per phase (15).
 */
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { readModelDir } from "@shoal/common/model-manifest";
import { ensureModel } from "@shoal/models";
import { createTextTokenizer } from "@shoal/worker/runtime/text-tokenizer";
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { scrape, total } from "../harness/prometheus.ts";
import { percentile, raggedRequests } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 15);
const log = (m: string): void => void process.stderr.write(`${m}\n`);
const packed = { encoding: VectorEncoding.FLOAT32_LE, truncate: true };

let broker: ScratchBroker | undefined;
if (!process.env["KAFKA_BROKERS"]) {
  broker = await startScratchBroker();
  process.env["KAFKA_BROKERS"] = broker.brokers;
}

interface Load {
  readonly lane: Lane;
  readonly concurrency: number;
  readonly request: (i: number) => string[];
}

/** Runs closed-loop loads for SECONDS; returns latencies per load and useful tokens/s overall. */
async function runLoads(cluster: TestCluster, loads: readonly Load[]): Promise<{ latencies: number[][]; tokensPerSecond: number }> {
  const model = cluster.modelIds[0]!;
  const { inference } = clientsFor(cluster.urls[0]!, "connect");
  const end = Date.now() + SECONDS * 1_000;
  let tokens = 0;
  const latencies = loads.map(() => [] as number[]);
  const t0 = performance.now();
  await Promise.all(
    loads.flatMap((load, li) =>
      Array.from({ length: load.concurrency }, async (_, c) => {
        for (let i = c; Date.now() < end; i += load.concurrency) {
          const t = performance.now();
          const res = await inference.embed({ model, inputs: load.request(i), options: packed, lane: load.lane }, { timeoutMs: 120_000 });
          latencies[li]!.push(performance.now() - t);
          tokens += res.usage?.promptTokens ?? 0;
        }
      }),
    ),
  );
  return { latencies, tokensPerSecond: tokens / ((performance.now() - t0) / 1000) };
}

async function usefulFraction(cluster: TestCluster, requests: string[][]): Promise<number> {
  const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
  const url = `http://127.0.0.1:${String(line["httpPort"])}/metrics`;
  const before = await scrape(url);
  await runLoads(cluster, [{ lane: Lane.INTERACTIVE, concurrency: 16, request: (i) => requests[i % requests.length]! }]);
  const after = await scrape(url);
  const d = (name: string): number => total(after, name) - total(before, name);
  return d("shoal_worker_tokens_total") / d("shoal_worker_padded_tokens_total");
}

const clusters: TestCluster[] = [];
try {
  const spec = await readModelDir(await ensureModel("mini"));
  const tokenizer = await createTextTokenizer(spec);
  const ragged = raggedRequests(tokenizer, { count: 200, perRequest: 8, minTokens: 8, maxTokens: 128, seed: 7 }).map((r) => r.texts);
  const long = Array.from({ length: 16 }, (_, i) => `${i} ${"the batch lane carries long documents to embed overnight ".repeat(30)}`);
  const short = (i: number): string[] => [`interactive query number ${i}`];
  const env = { SHOAL_INFERENCE_THREADS: "1", SHOAL_INTRA_OP_THREADS: "2" };

  log(`==> 1/3 useful-token fraction: fixed-window vs token-budget, ${SECONDS}s each`);
  const fixed = await startCluster({
    presets: ["mini"],
    workerEnv: { ...env, SHOAL_BATCH_POLICY: "fixed-window", SHOAL_BATCH_MAX_WAIT_MS: "5", SHOAL_BATCH_MAX_ITEMS: "32" },
  });
  clusters.push(fixed);
  const fixedFraction = await usefulFraction(fixed, ragged);
  await fixed.stop();
  clusters.pop();
  const tb = await startCluster({ presets: ["mini"], workerEnv: env });
  clusters.push(tb);
  const tbFraction = await usefulFraction(tb, ragged);
  log(`   fixed-window ${fixedFraction.toFixed(3)}, token-budget ${tbFraction.toFixed(3)}`);

  // Interactive latency under a saturated batch lane, for two ways to spend the two cores: one
  // inference thread with 2 intra-op threads (interactive runs wait for the batch-lane call in
  // progress, at most SHOAL_BATCH_LANE_CALL_TOKENS), and two threads with 1 intra-op thread each,
  // one of them kept for interactive work while there is some (SHOAL_INTERACTIVE_RESERVE).
  const interactiveLoad: Load = { lane: Lane.INTERACTIVE, concurrency: 2, request: short };
  const saturate: Load = { lane: Lane.BATCH, concurrency: 6, request: () => long };
  const p99s = async (cluster: TestCluster, name: string): Promise<{ alone: number; saturated: number }> => {
    log(`==> 2/3 interactive p99 (${name}): alone, then with the batch lane saturated (${SECONDS}s each)`);
    const alone = percentile((await runLoads(cluster, [interactiveLoad])).latencies[0]!, 99);
    const saturated = percentile((await runLoads(cluster, [interactiveLoad, saturate])).latencies[0]!, 99);
    log(`   p99 alone ${alone.toFixed(0)} ms, with batch lane saturated ${saturated.toFixed(0)} ms`);
    return { alone, saturated };
  };
  const oneThread = await p99s(tb, "1 inference thread x 2 intra-op");
  await tb.stop();
  clusters.pop();
  const reserved = await startCluster({ presets: ["mini"], workerEnv: { SHOAL_INFERENCE_THREADS: "2", SHOAL_INTRA_OP_THREADS: "1" } });
  clusters.push(reserved);
  const twoThreads = await p99s(reserved, "2 inference threads x 1 intra-op, 1 reserved");

  log(`==> 3/3 throughput of a mixed load: lanes vs one queue (2 threads x 1, ${SECONDS}s each)`);
  const mixed = (lane: Lane): Load[] => [
    { lane: Lane.INTERACTIVE, concurrency: 8, request: (i) => ragged[i % ragged.length]! },
    { lane, concurrency: 8, request: (i) => ragged[(i + 100) % ragged.length]! },
  ];
  const withLanes = await runLoads(reserved, mixed(Lane.BATCH));
  const oneQueue = await runLoads(reserved, mixed(Lane.INTERACTIVE));

  const row = (k: string, v: string): string => `| ${k.padEnd(70)} | ${v.padStart(10)} |`;
  console.log(`
Shoal scheduling benchmark — model ${reserved.modelIds[0]}, 1 worker, ${SECONDS}s per phase
${row("figure", "value")}
${row("useful-token fraction, fixed-window (32 items / 5 ms, one padded call)", fixedFraction.toFixed(3))}
${row("useful-token fraction, token-budget (sorted + split)", tbFraction.toFixed(3))}
${row("1 thread x 2 intra-op: interactive p99 ms, alone", oneThread.alone.toFixed(0))}
${row("1 thread x 2 intra-op: interactive p99 ms, batch lane saturated", oneThread.saturated.toFixed(0))}
${row("1 thread x 2 intra-op: saturated / alone", (oneThread.saturated / oneThread.alone).toFixed(2))}
${row("2 threads x 1, 1 reserved: interactive p99 ms, alone", twoThreads.alone.toFixed(0))}
${row("2 threads x 1, 1 reserved: interactive p99 ms, batch lane saturated", twoThreads.saturated.toFixed(0))}
${row("2 threads x 1, 1 reserved: saturated / alone", (twoThreads.saturated / twoThreads.alone).toFixed(2))}
${row("mixed load useful tokens/s, two lanes", withLanes.tokensPerSecond.toFixed(0))}
${row("mixed load useful tokens/s, one queue", oneQueue.tokensPerSecond.toFixed(0))}
${row("lanes / one queue", (withLanes.tokensPerSecond / oneQueue.tokensPerSecond).toFixed(3))}
`);
} finally {
  await Promise.all(clusters.map((c) => c.stop()));
  await broker?.stop();
}
