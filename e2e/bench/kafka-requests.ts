/**
 * `npm run bench:requests` — which Kafka requests the serving path makes, per second, by client and
 * API (issue #17): the broker's own request log (kafka.request.logger at DEBUG, written to a file of
 * this run's), counted over an idle phase and over each offered load of one-text requests. Every
 * client is counted the same way: kafkajs (gateway, worker producers and consumers) and
 * @shoal/kafka-share (the share-group intake, the gateway's lag reads).
 *
 * Env: BENCH_SECONDS (5 per phase), BENCH_LOADS (default "50": requests/s offered, or `cN` for N
 * callers each sending its next request when the last is answered, the overhead bench's closed
 * loop), BENCH_TEXTS (texts per request, default 1; 8 is the overhead bench's bulk request),
 * BENCH_WORKER_THREADS (inference threads, default 1). Starts its own broker (the request log
 * needs the broker's JVM flags); prints one table per phase.
 */
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { ratesBetween, startRequestLoggedBroker } from "./request-log.ts";

const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 5);
const LOADS = (process.env["BENCH_LOADS"] ?? "50").split(",");
const TEXTS_PER_CALL = Number(process.env["BENCH_TEXTS"] ?? 1);
const THREADS = process.env["BENCH_WORKER_THREADS"] ?? "1";
const TEXTS = ["a short query", "where is the reef", "kafka share groups", "small models, many of them", "hello there"];
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

const logged = await startRequestLoggedBroker();
const broker = logged.broker;
process.env["KAFKA_BROKERS"] = broker.brokers;
/** A phase: its window, and the requests answered in it (undefined: idle). */
const phases: { name: string; fromMs: number; toMs: number; answered?: number }[] = [];
try {
  const cluster = await startCluster({ presets: ["mini"], workerEnv: { SHOAL_INFERENCE_THREADS: THREADS, SHOAL_INTRA_OP_THREADS: "1" } });
  try {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const embed = (i: number) =>
      inference.embed(
        { model, inputs: Array.from({ length: TEXTS_PER_CALL }, (_, k) => TEXTS[(i + k) % TEXTS.length]!), options: { encoding: VectorEncoding.FLOAT32_LE } },
        { timeoutMs: 30_000 },
      );
    log("==> warm-up: 200 requests");
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        for (let i = c; i < 200; i += 8) await embed(i);
      }),
    );
    await new Promise((r) => setTimeout(r, 2_000));
    log(`==> idle: ${SECONDS} s`);
    let t = Date.now();
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    phases.push({ name: "idle", fromMs: t, toMs: Date.now() });
    for (const load of LOADS) {
      if (load.startsWith("c")) {
        const callers = Number(load.slice(1));
        log(`==> ${callers} callers of ${TEXTS_PER_CALL}-text requests, closed loop, for ${SECONDS} s`);
        t = Date.now();
        let answered = 0;
        let failed = 0;
        await Promise.all(
          Array.from({ length: callers }, async (_, c) => {
            for (let i = c; Date.now() - t < SECONDS * 1000; i += callers)
              await embed(i).then(
                () => answered++,
                () => failed++,
              );
          }),
        );
        const toMs = Date.now();
        phases.push({ name: `${callers} callers (${((answered * 1000) / (toMs - t)).toFixed(0)} req/s)`, fromMs: t, toMs, answered });
        if (failed > 0) log(`   ${failed} calls failed`);
        continue;
      }
      const rate = Number(load);
      log(`==> ${rate} ${TEXTS_PER_CALL}-text requests/s for ${SECONDS} s`);
      t = Date.now();
      const t0 = performance.now();
      const calls: Promise<unknown>[] = [];
      for (let i = 0; i < rate * SECONDS; i++) {
        const wait = t0 + (i * 1000) / rate - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        calls.push(
          embed(i).then(
            () => true,
            () => false,
          ),
        );
      }
      const answered = (await Promise.all(calls)).filter(Boolean).length;
      const toMs = Date.now();
      phases.push({ name: `${rate} req/s offered (${((rate * SECONDS * 1000) / (toMs - t)).toFixed(0)} served)`, fromMs: t, toMs, answered });
      if (answered < calls.length) log(`   ${calls.length - answered} of ${calls.length} calls failed`);
    }
  } finally {
    await cluster.stop();
  }
  await new Promise((r) => setTimeout(r, 500));
  const entries = await logged.requests();
  const all = phases.map((p) => ratesBetween(entries, p.fromMs, p.toMs));
  const keys = [...new Set(all.flatMap((m) => [...m.keys()]))].sort((a, b) => (all.at(-1)!.get(b) ?? 0) - (all.at(-1)!.get(a) ?? 0));
  // Idle: requests per second; under load: requests per answered call (the idle ones included).
  const scale = phases.map((p) => (p.answered === undefined ? 1 : (p.toMs - p.fromMs) / 1000 / p.answered));
  const cell = (i: number, v: number): string => (v * scale[i]!).toFixed(phases[i]!.answered === undefined ? 1 : 2);
  console.log(`\nKafka requests by client and API (broker request log), ${SECONDS} s per phase: per second at idle, per call under load\n`);
  console.log(`| client API | ${phases.map((p) => p.name).join(" | ")} |`);
  console.log(`| --- | ${phases.map(() => "---:").join(" | ")} |`);
  for (const k of keys) console.log(`| ${k} | ${all.map((m, i) => cell(i, m.get(k) ?? 0)).join(" | ")} |`);
  console.log(
    `| **total** | ${all
      .map(
        (m, i) =>
          `**${cell(
            i,
            [...m.values()].reduce((a, b) => a + b, 0),
          )}**`,
      )
      .join(" | ")} |`,
  );
} finally {
  await logged.stop();
}
