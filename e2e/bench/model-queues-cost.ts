/**
 * `npm run bench:model-queues-cost` — what a queue per model costs (issue #16/#17): the same pool of
 * nine models (the MiniLM-shaped model under nine ids) served with one jobs topic per lane
 * (`per-lane`) and with one per model and lane (`per-model`, one share-group member per topic on
 * every worker), one after the other against one broker. Per layout, from /proc CPU counters:
 * the idle background of broker, gateway and workers (CPU ms per second), then CPU ms per request
 * at a light open-loop load spread over the nine models, and its latency. Prints per-model ÷
 * per-lane for each figure. Asserts nothing (a benchmark).
 *
 * Env: KAFKA_BROKERS (default: a scratch broker), BENCH_SECONDS (15 per phase), BENCH_RATE
 * (requests/s, 30), BENCH_WORKERS (2), BENCH_ORDER (`reverse`: per-model first).
 */
import { ensureModel } from "@shoal/models";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { benchBroker } from "./bench-broker.ts";
import { pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { percentile } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 15);
const RATE = Number(process.env["BENCH_RATE"] ?? 30);
const WORKERS = Number(process.env["BENCH_WORKERS"] ?? 2);
const MODELS = Array.from({ length: 9 }, (_, i) => `model-${i}`);
const LAYOUTS = ["per-lane", "per-model"] as const;
type Layout = (typeof LAYOUTS)[number];

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Figures {
  readonly idle: Record<string, number>;
  readonly perRequest: Record<string, number>;
  readonly answered: number;
  readonly failed: number;
  readonly p50: number;
  readonly p99: number;
}

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);
const brokerPort = Number(process.env["KAFKA_BROKERS"]!.split(",")[0]!.split(":")[1]);

async function measure(layout: Layout): Promise<Figures> {
  log(`==> ${layout}: ${WORKERS} workers, one gateway, ${MODELS.length} models`);
  const dir = await ensureModel("mini");
  const cluster = await startCluster({
    workers: WORKERS,
    presets: [],
    entries: MODELS.map((id) => ({ dir, fields: { id } })),
    intake: "share",
    jobTopics: layout,
    workerEnv: { SHOAL_INFERENCE_THREADS: "1", SHOAL_INTRA_OP_THREADS: "1" },
  });
  current = cluster;
  try {
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const call = (i: number) => inference.embed({ model: MODELS[i % MODELS.length]!, inputs: [`a short query ${i % 13}`] }, { timeoutMs: 30_000 });
    // Every model loaded on every worker before the clock starts.
    for (let round = 0; round < 3; round++) await Promise.all(Array.from({ length: MODELS.length * WORKERS * 2 }, (_, i) => call(i)));
    const brokerPid = await pidListeningOn(brokerPort);
    const pids: Record<string, number[]> = {
      broker: brokerPid === undefined ? [] : [brokerPid],
      gateway: cluster.gateways.map((g) => g.pid!),
      workers: cluster.workers.map((w) => w.pid!),
    };
    const snapshot = async (): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const [name, list] of Object.entries(pids)) out[name] = (await Promise.all(list.map(processCpuMs))).reduce((a, b) => a + b, 0);
      return out;
    };
    log(`   idle ${SECONDS} s`);
    const idle0 = await snapshot();
    const t0 = performance.now();
    await sleep(SECONDS * 1000);
    const idle1 = await snapshot();
    const idleS = (performance.now() - t0) / 1000;
    const idle = Object.fromEntries(Object.keys(idle0).map((k) => [k, (idle1[k]! - idle0[k]!) / idleS]));
    log(`   ${RATE} requests/s for ${SECONDS} s over the ${MODELS.length} models (open loop)`);
    const load0 = await snapshot();
    const t1 = performance.now();
    const latencies: number[] = [];
    let failed = 0;
    const calls: Promise<void>[] = [];
    const total = Math.round(RATE * SECONDS);
    for (let i = 0; i < total; i++) {
      const due = t1 + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const start = performance.now();
      calls.push(
        call(i).then(
          () => void latencies.push(performance.now() - start),
          () => void failed++,
        ),
      );
    }
    await Promise.all(calls);
    const load1 = await snapshot();
    const perRequest = Object.fromEntries(Object.keys(load0).map((k) => [k, (load1[k]! - load0[k]!) / total]));
    return { idle, perRequest, answered: latencies.length, failed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  } finally {
    await cluster.stop();
    current = undefined;
  }
}

try {
  const results = new Map<Layout, Figures>();
  // BENCH_ORDER=reverse measures per-model first (a busy machine's drift shows as a change with the order).
  for (const layout of process.env["BENCH_ORDER"] === "reverse" ? [...LAYOUTS].reverse() : LAYOUTS) results.set(layout, await measure(layout));
  const lane = results.get("per-lane")!;
  const model = results.get("per-model")!;
  const fmt = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : "—");
  const row = (label: string, a: number, b: number): string => `| ${label} | ${fmt(a)} | ${fmt(b)} | ${fmt(b / a)} |`;
  console.log(
    [
      "",
      `Queue per model vs per lane — ${MODELS.length} models, ${WORKERS} workers, 1 gateway, 1 broker; ${RATE} one-text requests/s for ${SECONDS} s`,
      "",
      "| figure | per-lane | per-model | per-model ÷ per-lane |",
      "|---|---:|---:|---:|",
      ...Object.keys(lane.idle).map((k) => row(`idle CPU ms/s, ${k}`, lane.idle[k]!, model.idle[k]!)),
      ...Object.keys(lane.perRequest).map((k) => row(`CPU ms per request, ${k}`, lane.perRequest[k]!, model.perRequest[k]!)),
      row("latency p50 ms", lane.p50, model.p50),
      row("latency p99 ms", lane.p99, model.p99),
      `| answered / failed | ${lane.answered} / ${lane.failed} | ${model.answered} / ${model.failed} | |`,
    ].join("\n"),
  );
} finally {
  await broker?.stop();
}
