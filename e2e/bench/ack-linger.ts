/**
 * `npm run bench:ack-linger` — what holding acknowledgements back saves the broker
 * (`ackLingerMs` of @shoal/kafka-share, the worker's SHOAL_SHARE_ACK_LINGER_MS; issue #17). The
 * broker persists share state once per partition per acknowledging request, so at light load, one
 * job per fetch, every accepted job costs a share-state write of its own.
 *
 * One scratch broker, two share consumers of this process, each in its own group on its own
 * one-partition topic, one with each linger; both run the whole time the way the worker's intake
 * does (a waiting fetch of 100 ms, each record accepted 3 ms after it came, the ack riding a later
 * fetch). Phases take turns (A B A B ...): an idempotent producer writes one record at a time, at a
 * fixed rate, to one arm's topic, and the broker's CPU (/proc) and this process's are charged to
 * that arm per record. The other arm idles meanwhile, so the idle background falls on both alike.
 * A warm-up phase per arm first (the broker's JIT warms per kind of request); the table gives
 * each arm's median round.
 *
 * Env: BENCH_LINGER_MS (100), BENCH_RATES (records/s, "50,200"), BENCH_SECONDS (15 per phase),
 * BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (90 per arm).
 */
import { stopKafkajsIdleLoop } from "@shoal/common";
import { createShareConsumer, type ShareConsumer } from "@shoal/kafka-share";
import { Kafka, logLevel } from "kafkajs";
import { startScratchBroker } from "../../infra/dev/broker.ts";
import { pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { consumeLikeIntake } from "./intake-pattern.ts";

const LINGER_MS = Number(process.env["BENCH_LINGER_MS"] ?? 100);
const RATES = (process.env["BENCH_RATES"] ?? "50,200").split(",").map(Number);
const SECONDS = Number(process.env["BENCH_SECONDS"] ?? 15);
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3);
const WARMUP_SECONDS = Number(process.env["BENCH_WARMUP_SECONDS"] ?? 90);
const VALUE = Buffer.alloc(1_024, 7);
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

interface Arm {
  readonly name: string;
  readonly topic: string;
  readonly consumer: ShareConsumer;
  received: number;
  ackRequests: number;
}

// As every Shoal process does (createKafka): no 1 ms timer loop per idle kafkajs connection.
stopKafkajsIdleLoop();
const broker = await startScratchBroker();
let running = true;
try {
  const brokerPid = (await pidListeningOn(Number(broker.brokers.split(":")[1])))!;
  const kafka = new Kafka({ clientId: "ack-linger-bench", brokers: [broker.brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const lingers = [0, LINGER_MS];
  await admin.createTopics({ topics: lingers.map((l) => ({ topic: `linger-${l}`, numPartitions: 1 })), waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const arms: Arm[] = lingers.map((l) => ({
    name: `linger ${l} ms`,
    topic: `linger-${l}`,
    consumer: createShareConsumer({
      brokers: [broker.brokers],
      groupId: `g-linger-${l}`,
      clientId: `linger-${l}`,
      groupConfig: { autoOffsetReset: "earliest" },
      ackLingerMs: l,
    }),
    received: 0,
    ackRequests: 0,
  }));
  for (const arm of arms) {
    // One event per partition per acknowledging request: one partition here, so one per request.
    arm.consumer.on("acknowledged", () => arm.ackRequests++);
    await new Promise<void>((resolve) => {
      arm.consumer.on("joined", () => resolve());
      arm.consumer.subscribe([arm.topic]);
    });
  }
  const loops = arms.map((arm) => consumeLikeIntake(arm, () => running));

  /** One phase: `rate` records/s to `arm`'s topic for `seconds`; CPU ms per record. */
  const phase = async (arm: Arm, rate: number, seconds: number): Promise<{ broker: number; client: number; requests: number }> => {
    const n = Math.round(rate * seconds);
    const [r0, a0] = [arm.received, arm.ackRequests];
    const b0 = await processCpuMs(brokerPid);
    const u0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await producer.send({ topic: arm.topic, acks: -1, messages: [{ value: VALUE }] });
    }
    // Until every record came and its ack went (the linger's included).
    const deadline = performance.now() + 5_000;
    while ((arm.received - r0 < n || arm.consumer.metrics().sessions.some((s) => s.pendingAcks > 0)) && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const u = process.cpuUsage(u0);
    const b = (await processCpuMs(brokerPid)) - b0;
    return { broker: b / n, client: (u.user + u.system) / 1000 / n, requests: (arm.ackRequests - a0) / n };
  };

  log(`==> warm-up: ${WARMUP_SECONDS} s per arm at ${RATES[0]} records/s`);
  for (const arm of arms) await phase(arm, RATES[0]!, WARMUP_SECONDS);

  const rows: string[] = [];
  for (const rate of RATES) {
    const sums = arms.map(() => ({ broker: [] as number[], client: [] as number[], requests: [] as number[] }));
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate which arm goes first, so a drift of the machine falls on both alike.
      const order = round % 2 === 1 ? [0, 1] : [1, 0];
      for (const i of order) {
        const r = await phase(arms[i]!, rate, SECONDS);
        sums[i]!.broker.push(r.broker);
        sums[i]!.client.push(r.client);
        sums[i]!.requests.push(r.requests);
        log(
          `   ${rate}/s round ${round}, ${arms[i]!.name}: broker ${r.broker.toFixed(3)}, client ${r.client.toFixed(3)} CPU ms per record; ${r.requests.toFixed(2)} acknowledging requests per record`,
        );
      }
    }
    // The median round: the first rounds of a rate can still carry the broker's JIT warming.
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const [off, on] = sums;
    rows.push(
      `| ${rate} | ${median(off!.requests).toFixed(2)} → ${median(on!.requests).toFixed(2)} | ${median(off!.broker).toFixed(3)} → ${median(on!.broker).toFixed(3)} (${(median(on!.broker) / median(off!.broker)).toFixed(2)}×) | ${median(off!.client).toFixed(3)} → ${median(on!.client).toFixed(3)} (${(median(on!.client) / median(off!.client)).toFixed(2)}×) |`,
    );
  }
  console.log(`
Acknowledgements held back ${LINGER_MS} ms (ackLingerMs) against none, one share consumer per arm, ${ROUNDS} alternating rounds of ${SECONDS} s per rate; the median round
| records/s | acknowledging requests per record | broker CPU ms per record | client CPU ms per record (producer + consumer) |
| ---: | --- | --- | --- |
${rows.join("\n")}
`);
  running = false;
  await Promise.all(loops);
  await Promise.all(arms.map((a) => a.consumer.close()));
  await producer.disconnect();
} finally {
  running = false;
  await broker.stop();
}
