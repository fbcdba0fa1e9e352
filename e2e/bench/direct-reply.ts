/**
 * `npm run bench:direct-reply` — two ways a result reaches its gateway, interleaved in one run
 * (issue #17). One broker, one worker, two gateways, one per arm (BENCH_ARMS, two of):
 *  - `direct`: the default, results as frames of the worker's result stream to the gateway;
 *  - `post`: one POST per result (SHOAL_DIRECT_REPLY_STREAMS=0 on that gateway: it answers the
 *    stream 404, as a gateway before result streams does, and the worker POSTs to it);
 *  - `topic`: through the gateway's reply topic (SHOAL_DIRECT_REPLY=0 on that gateway).
 * The same worker serves both gateways; everything else is shared, and the two arms alternate, so
 * the host's noise falls on both alike:
 *  1. latency at light load: one call at a time, alternating gateways call by call (Connect binary);
 *  2. CPU ms per request at fixed offered loads: phases of `BENCH_SECONDS` alternating A B A B,
 *     from /proc counters of both gateways, the worker's main thread and the broker.
 * Prints figures and direct ÷ topic ratios; asserts nothing (a benchmark, not a test).
 *
 * Env: BENCH_ARMS (default "direct,topic"; "direct,post": stream against POST), KAFKA_BROKERS
 * (default: a scratch broker), BENCH_SECONDS (10 per phase), BENCH_LOADS
 * (requests/s, default "50,200"), BENCH_CALLS (600 light-load calls per arm), BENCH_WARMUP_SECONDS
 * (120: one call at a time, alternating, after 10 s saturated; warms the broker's JIT, see bench:cost).
 */
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { benchBroker } from "./bench-broker.ts";
import { mainThreadCpuMs, pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { percentile } from "./workload.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 10);
const LOADS = (process.env["BENCH_LOADS"] ?? "50,200").split(",").map(Number);
const CALLS = Number(process.env["BENCH_CALLS"] ?? 600);
const WARMUP_SECONDS = Number(process.env["BENCH_WARMUP_SECONDS"] ?? 120);
const TEXTS = ["a short query", "where is the reef", "kafka share groups", "small models, many of them", "hello there"];
/** Each arm's gateway settings. */
const ARM_ENV = { direct: {}, post: { SHOAL_DIRECT_REPLY_STREAMS: "0" }, topic: { SHOAL_DIRECT_REPLY: "0" } } as const;
type Arm = keyof typeof ARM_ENV;
const ARM_NAMES: Record<Arm, string> = { direct: "direct (stream)", post: "direct (POST each)", topic: "reply topic" };
const ARMS = (process.env["BENCH_ARMS"] ?? "direct,topic").split(",") as Arm[];
if (ARMS.length !== 2 || ARMS[0] === ARMS[1] || !ARMS.every((a) => a in ARM_ENV)) {
  throw new Error(`BENCH_ARMS must name two of ${Object.keys(ARM_ENV).join(", ")}, got ${JSON.stringify(process.env["BENCH_ARMS"])}`);
}
const [A, B] = ARMS as [Arm, Arm];

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);
const fmt = (n: number, d = 2): string => n.toFixed(d);

let current: TestCluster | undefined;
const broker = await benchBroker(log, () => current);
const brokerPort = Number(process.env["KAFKA_BROKERS"]!.split(",")[0]!.split(":")[1]);

try {
  log(`==> one worker (1 inference thread x 1 intra-op), gateway 0: ${ARM_NAMES[A]}, gateway 1: ${ARM_NAMES[B]}`);
  const cluster = await startCluster({
    presets: ["mini"],
    gateways: 2,
    workerEnv: { SHOAL_INFERENCE_THREADS: "1", SHOAL_INTRA_OP_THREADS: "1" },
    gatewayEnvAt: (i): Record<string, string> => ({ ...ARM_ENV[ARMS[i]!] }),
  });
  current = cluster;
  try {
    const model = cluster.modelIds[0]!;
    const clients = { [A]: clientsFor(cluster.urls[0]!, "connect").inference, [B]: clientsFor(cluster.urls[1]!, "connect").inference } as Record<
      Arm,
      ReturnType<typeof clientsFor>["inference"]
    >;
    const embed = (arm: Arm, i: number) =>
      clients[arm].embed({ model, inputs: [TEXTS[i % TEXTS.length]!], options: { encoding: VectorEncoding.FLOAT32_LE } }, { timeoutMs: 30_000 });
    const pids = { gateways: cluster.gateways.map((g) => g.pid), worker: cluster.workers[0]!.pid, broker: await pidListeningOn(brokerPort) };
    log(`pids: gateways ${pids.gateways.join(", ")}, worker ${pids.worker}, broker ${pids.broker ?? "not found"}`);

    log(`==> warm-up: 64 in flight for ${SECONDS} s, then one call at a time for ${WARMUP_SECONDS} s, alternating gateways`);
    const warmUntil = performance.now() + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: 64 }, async (_, c) => {
        for (let i = c; performance.now() < warmUntil; i += 64) await embed(ARMS[i % 2]!, i);
      }),
    );
    const lightUntil = performance.now() + WARMUP_SECONDS * 1000;
    let warmCalls = 0;
    while (performance.now() < lightUntil) await embed(ARMS[warmCalls % 2]!, warmCalls++);
    log(`   ${warmCalls} calls`);

    const directWorkerSent = async (): Promise<string> => {
      const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
      const text = await (await fetch(`http://127.0.0.1:${String(line["httpPort"])}/metrics`)).text();
      return text
        .split("\n")
        .filter((l) => l.startsWith("shoal_worker_results_sent_total"))
        .join("; ");
    };
    log(`   worker: ${await directWorkerSent()}`);

    log(`==> 1/2 light load: ${CALLS} calls per arm, one at a time, alternating`);
    const latency = { [A]: [], [B]: [] } as unknown as Record<Arm, number[]>;
    for (let i = 0; i < 2 * CALLS; i++) {
      const arm = ARMS[i % 2]!;
      const t = performance.now();
      await embed(arm, i);
      latency[arm].push(performance.now() - t);
    }

    const cpu = async () => ({
      gateways: (await Promise.all(pids.gateways.map((p) => processCpuMs(p)))).reduce((a, b) => a + b, 0),
      workerMain: await mainThreadCpuMs(pids.worker),
      broker: pids.broker === undefined ? 0 : await processCpuMs(pids.broker),
    });
    type Cost = { gateways: number; workerMain: number; broker: number; answered: number };
    const costs = new Map<string, Cost>();
    for (const rate of LOADS) {
      for (const [phase, arm] of [A, B, A, B].entries()) {
        log(`==> 2/2 ${rate} req/s, phase ${phase + 1}/4 (${arm}), ${SECONDS} s open loop`);
        const before = await cpu();
        const t0 = performance.now();
        const calls: Promise<unknown>[] = [];
        let answered = 0;
        for (let i = 0; i < rate * SECONDS; i++) {
          const wait = t0 + (i * 1000) / rate - performance.now();
          if (wait > 1) await new Promise((r) => setTimeout(r, wait));
          calls.push(embed(arm, i).then(() => answered++));
        }
        await Promise.allSettled(calls);
        const after = await cpu();
        const key = `${rate}/${arm}`;
        const sum = costs.get(key) ?? { gateways: 0, workerMain: 0, broker: 0, answered: 0 };
        costs.set(key, {
          gateways: sum.gateways + after.gateways - before.gateways,
          workerMain: sum.workerMain + after.workerMain - before.workerMain,
          broker: sum.broker + after.broker - before.broker,
          answered: sum.answered + answered,
        });
      }
    }
    log(`   worker: ${await directWorkerSent()}`);

    const out: string[] = [];
    out.push("", `${ARM_NAMES[A]} against ${ARM_NAMES[B]}, interleaved — 1 worker, 2 gateways (one per arm), 1 broker, one machine`);
    const head = `| ${ARM_NAMES[A]} | ${ARM_NAMES[B]} | ${A} ÷ ${B} |`;
    out.push("", `| light load, Connect binary, one call at a time ${head}`, "| --- | --- | --- | --- |");
    for (const p of [50, 90, 99]) {
      const d = percentile(latency[A], p);
      const t = percentile(latency[B], p);
      out.push(`| latency p${p} (ms) | ${fmt(d)} | ${fmt(t)} | ${fmt(d / t)} |`);
    }
    out.push(`| p50 saved (ms) | ${fmt(percentile(latency[B], 50) - percentile(latency[A], 50))} | | |`);
    out.push("", `| CPU ms per request (two phases each, A B A B) ${head}`, "| --- | --- | --- | --- |");
    for (const rate of LOADS) {
      const d = costs.get(`${rate}/${A}`)!;
      const t = costs.get(`${rate}/${B}`)!;
      const row = (name: string, f: (c: Cost) => number): string => {
        const dv = f(d) / d.answered;
        const tv = f(t) / t.answered;
        return `| ${rate} req/s: ${name} | ${fmt(dv)} | ${fmt(tv)} | ${fmt(dv / tv)} |`;
      };
      out.push(row("both gateways", (c) => c.gateways));
      out.push(row("worker main thread", (c) => c.workerMain));
      out.push(row("broker", (c) => c.broker));
      out.push(row("**path (sum)**", (c) => c.gateways + c.workerMain + c.broker));
      out.push(`| ${rate} req/s: answered | ${d.answered} | ${t.answered} | |`);
    }
    console.log(out.join("\n"));
  } finally {
    log("==> stopping the cluster");
    await cluster.stop();
    current = undefined;
  }
} finally {
  await broker?.stop();
}
