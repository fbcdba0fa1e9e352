/**
 * The forged worker-status flood of the adversarial suite, run as its own process (as an attacker
 * would be): `node --import tsx e2e/harness/status-flood.ts <brokers> <pool> <count> <intervalMs>`.
 * It connects a producer and encodes `count` statuses of distinct forged worker ids, prints
 * `ready`, waits for a line on stdin, produces them to shoal.status in batches of 500, and prints
 * a JSON line with the flood's duration. In the test's own process the encoding and producing
 * shared the polite caller's event loop.
 */
import { createInterface } from "node:readline";
import { create } from "@bufbuild/protobuf";
import { encodeStatus, STATUS_TOPIC } from "@shoal/common";
import { WorkerStatusSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { Kafka, logLevel } from "kafkajs";

const [brokers, pool, count, intervalMs] = process.argv.slice(2);
if (brokers === undefined || pool === undefined) throw new Error("usage: status-flood.ts <brokers> <pool> [count] [intervalMs]");
const total = Number(count ?? 5_000);
const producer = new Kafka({ clientId: "e2e-status-flood", brokers: brokers.split(","), logLevel: logLevel.NOTHING }).producer();
await producer.connect();
const batches = Array.from({ length: Math.ceil(total / 500) }, (_, b) =>
  Array.from({ length: Math.min(500, total - b * 500) }, (_, j) => {
    const workerId = `forged-${b * 500 + j}`;
    const value = encodeStatus(create(WorkerStatusSchema, { workerId, pool, updatedUnixMs: BigInt(Date.now()), intervalMs: Number(intervalMs ?? 1_500) }));
    return { key: workerId, value: Buffer.from(value) };
  }),
);
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
lines.close();
const started = performance.now();
for (const messages of batches) await producer.send({ topic: STATUS_TOPIC, messages });
process.stdout.write(`${JSON.stringify({ ms: Math.round(performance.now() - started) })}\n`);
await producer.disconnect();
