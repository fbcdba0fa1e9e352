/**
 * `npm run bench:tracing` — what tracing costs: the same closed-loop load against two clusters on
 * one broker, one exporting every span to a real Jaeger and one with tracing off, in alternating
 * phases of one run (off, on, off, on, ...) so machine noise hits both alike. BENCH_PRESET=mini
 * (default) serves the MiniLM-shaped model with 8 texts of 8–128 tokens per request, as in
 * bench:overhead; BENCH_PRESET=tiny with short texts makes per-request overhead dominate: the
 * worst case for tracing's cost. Prints requests/s for each and the ratio; asserts nothing.
 *
 * Env: KAFKA_BROKERS (default: a scratch broker), BENCH_PHASE_SECONDS (8), BENCH_PHASES (3 per
 * side), BENCH_CONCURRENCY (16).
 */
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { startScratchJaeger } from "../../infra/dev/jaeger.ts";
import { startCluster, type TestCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";

const PHASE_S = Number(process.env["BENCH_PHASE_SECONDS"] ?? 8);
const PHASES = Number(process.env["BENCH_PHASES"] ?? 3);
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 16);
const PRESET = process.env["BENCH_PRESET"] ?? "mini";
const log = (m: string): void => void process.stderr.write(`${m}\n`);

let broker: ScratchBroker | undefined;
if (!process.env["KAFKA_BROKERS"]) {
  broker = await startScratchBroker();
  process.env["KAFKA_BROKERS"] = broker.brokers;
}
const jaeger = await startScratchJaeger();
const clusters: TestCluster[] = [];
try {
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttp };
  log("==> starting two clusters: tracing off / tracing on");
  const threads = { SHOAL_INFERENCE_THREADS: "1", SHOAL_INTRA_OP_THREADS: "2" };
  const off = await startCluster({ presets: [PRESET], workerEnv: threads });
  clusters.push(off);
  const on = await startCluster({ presets: [PRESET], gatewayEnv: otel, workerEnv: { ...otel, ...threads } });
  clusters.push(on);
  const words = "the quick brown fox jumps over the lazy dog while workers pull jobs from kafka".split(" ");
  const texts =
    PRESET === "tiny"
      ? Array.from({ length: 8 }, (_, i) => `a short text number ${i} for the tracing benchmark`)
      : Array.from({ length: 8 }, (_, i) => Array.from({ length: 4 + i * 6 }, (_, k) => words[(i + k) % words.length]).join(" "));

  async function phase(cluster: TestCluster): Promise<number> {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const end = Date.now() + PHASE_S * 1_000;
    let n = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (Date.now() < end) {
          await inference.embed({ model, inputs: texts, options: { encoding: VectorEncoding.FLOAT32_LE } });
          n += 1;
        }
      }),
    );
    return n / PHASE_S;
  }

  await phase(off); // warm-up both
  await phase(on);
  const rates = { off: [] as number[], on: [] as number[] };
  for (let i = 0; i < PHASES; i++) {
    rates.off.push(await phase(off));
    rates.on.push(await phase(on));
    log(`   phase ${i + 1}/${PHASES}: off ${rates.off.at(-1)!.toFixed(0)} req/s, on ${rates.on.at(-1)!.toFixed(0)} req/s`);
  }
  const mean = (a: number[]): number => a.reduce((x, y) => x + y, 0) / a.length;
  const ratio = mean(rates.on) / mean(rates.off);
  console.log(`
Shoal tracing benchmark — preset ${PRESET}, 8 texts per request, ${CONCURRENCY} in flight, ${PHASES} x ${PHASE_S}s per side
| figure                         |       value |
| tracing off, requests/s        | ${mean(rates.off).toFixed(1).padStart(11)} |
| tracing on (Jaeger), requests/s| ${mean(rates.on).toFixed(1).padStart(11)} |
| on / off                       | ${ratio.toFixed(3).padStart(11)} |
| cost of tracing                | ${`${((1 - ratio) * 100).toFixed(1)}%`.padStart(11)} |
`);
} finally {
  await Promise.all(clusters.map((c) => c.stop()));
  await jaeger.stop();
  await broker?.stop();
}
