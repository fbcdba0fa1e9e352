/**
 * `node --import tsx e2e/bench/openai-latency.ts` — latency of `POST /v1/embeddings` next to the
 * same call over Connect (Embed), one request at a time against a local stack (one gateway, one
 * worker, the tiny test model). Prints p50 / p90 / p99 / mean; asserts nothing.
 *
 * Env: KAFKA_BROKERS (default: a scratch broker on a free port), BENCH_REQUESTS (200).
 */
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { startCluster } from "../harness/cluster.ts";
import { clientsFor } from "../harness/clients.ts";
import { percentile } from "./workload.ts";

const REQUESTS = Number(process.env["BENCH_REQUESTS"] ?? 200);
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

let broker: ScratchBroker | undefined;
if (!process.env["KAFKA_BROKERS"]) {
  broker = await startScratchBroker();
  process.env["KAFKA_BROKERS"] = broker.brokers;
}

try {
  const cluster = await startCluster();
  try {
    const model = cluster.modelIds[0]!;
    const base = cluster.urls[0]!;
    const { inference } = clientsFor(base, "connect");
    const openai = async (i: number): Promise<void> => {
      const res = await fetch(`${base}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, input: [`latency probe ${i}`], encoding_format: "float" }),
      });
      if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
      await res.json();
    };
    const connect = async (i: number): Promise<void> => void (await inference.embed({ model, inputs: [`latency probe ${i}`] }));
    const measure = async (name: string, call: (i: number) => Promise<void>): Promise<void> => {
      for (let i = 0; i < 20; i++) await call(i); // warm-up
      const ms: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const t0 = performance.now();
        await call(i);
        ms.push(performance.now() - t0);
      }
      ms.sort((a, b) => a - b);
      const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
      log(
        `${name.padEnd(22)} n=${ms.length} p50 ${percentile(ms, 50).toFixed(2)} ms  p90 ${percentile(ms, 90).toFixed(2)} ms  p99 ${percentile(ms, 99).toFixed(2)} ms  mean ${mean.toFixed(2)} ms`,
      );
    };
    // Alternating rounds, so load from elsewhere on the machine hits both alike.
    for (let round = 1; round <= 2; round++) {
      await measure(`POST /v1/embeddings #${round}`, openai);
      await measure(`Connect Embed #${round}`, connect);
    }
  } finally {
    await cluster.stop();
  }
} finally {
  await broker?.stop();
}
