/**
 * `npm run bench:kafka-clients` — kafkajs beside @platformatic/kafka on the two Kafka legs of a
 * light-load call (issue #17: "if kafkajs costs too much per record, measure a well-kept
 * alternative side by side"), one request at a time on a scratch broker, CPU from the client
 * process (process.cpuUsage) and the broker (/proc):
 *  - produce: an idempotent acks=all Produce of one result-sized record (1.5 KB), awaited;
 *  - round trip: that Produce, then a group consumer of the same process receives the record (a
 *    job reaching a consumer-group worker, or a result reaching the gateway's reply reader).
 * Each client runs alone (its own producer, consumer and group; the other's closed), with the same
 * settings as Shoal's readers (heartbeat 3 s, fetch wait 500 ms, min bytes 1). Rounds in turn
 * (kafkajs first, then @platformatic/kafka first, ...): the first also warms the broker's JIT.
 * Share groups are not compared: @platformatic/kafka has no share consumer (Shoal's is @shoal/kafka-share).
 *
 * Env: BENCH_N (1,000 requests per measure), BENCH_ROUNDS (3).
 */
import { Consumer, Producer } from "@platformatic/kafka";
import { Kafka, logLevel } from "kafkajs";
import { startScratchBroker } from "../../infra/dev/broker.ts";
import { pidListeningOn, processCpuMs } from "./cpu-counters.ts";
import { percentile } from "./workload.ts";

const N = Number(process.env["BENCH_N"] ?? 1_000);
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3);
const VALUE = Buffer.alloc(1_536, 7);
const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** One client's two legs: `produce(i)` resolves when acknowledged, `roundTrip(i)` when consumed too. */
interface Client {
  readonly name: string;
  produce(i: number): Promise<void>;
  roundTrip(i: number): Promise<void>;
  close(): Promise<void>;
}

/** Resolves `waitFor(i)` when the consumer sees the record keyed `i` (the round trip's end). */
function arrivals(): { seen(key: string): void; waitFor(i: number): Promise<void> } {
  const waiting = new Map<string, () => void>();
  const early = new Set<string>();
  return {
    seen(key) {
      const w = waiting.get(key);
      if (w) {
        waiting.delete(key);
        w();
      } else early.add(key);
    },
    waitFor(i) {
      const key = `rt-${i}`;
      if (early.delete(key)) return Promise.resolve();
      return new Promise((resolve) => waiting.set(key, resolve));
    },
  };
}

/** The two legs over a client's `send` (one record, awaited) and its consumer's arrivals. */
function clientOf(name: string, send: (key: string) => Promise<unknown>, a: ReturnType<typeof arrivals>, close: () => Promise<void>): Client {
  return {
    name,
    produce: async (i) => void (await send(`p-${i}`)),
    async roundTrip(i) {
      const seen = a.waitFor(i);
      await send(`rt-${i}`);
      await seen;
    },
    close,
  };
}

async function kafkajsClient(brokers: string, topic: string, round: number): Promise<Client> {
  const kafka = new Kafka({ clientId: `kafkajs-${round}`, brokers: [brokers], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  const consumer = kafka.consumer({ groupId: `kafkajs-${round}`, sessionTimeout: 10_000, heartbeatInterval: 3_000, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  const a = arrivals();
  let joined!: () => void;
  const join = new Promise<void>((r) => (joined = r));
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  await consumer.run({ autoCommit: false, eachMessage: async ({ message }) => a.seen(message.key?.toString() ?? "") });
  await join;
  const send = (key: string): Promise<unknown> => producer.send({ topic, acks: -1, messages: [{ key, value: VALUE }] });
  return clientOf("kafkajs 2.2.4", send, a, async () => {
    await consumer.disconnect();
    await producer.disconnect();
  });
}

async function platformaticClient(brokers: string, topic: string, round: number): Promise<Client> {
  const producer = new Producer({ clientId: `platformatic-${round}`, bootstrapBrokers: [brokers], idempotent: true, acks: -1, autocreateTopics: false });
  const consumer = new Consumer({
    clientId: `platformatic-${round}`,
    groupId: `platformatic-${round}`,
    bootstrapBrokers: [brokers],
    sessionTimeout: 10_000,
    heartbeatInterval: 3_000,
    maxWaitTime: 500,
    minBytes: 1,
  });
  const stream = await consumer.consume({ topics: [topic], mode: "latest", autocommit: false });
  const a = arrivals();
  stream.on("data", (m: { key?: Buffer }) => a.seen(m.key?.toString() ?? ""));
  const send = (key: string): Promise<unknown> => producer.send({ messages: [{ topic, key: Buffer.from(key), value: VALUE }] });
  return clientOf("@platformatic/kafka 2.12.1", send, a, async () => {
    await stream.close();
    await consumer.close();
    await producer.close();
  });
}

interface Figures {
  readonly clientMs: number;
  readonly brokerMs: number;
  readonly p50: number;
  readonly p99: number;
}

async function measure(fn: (i: number) => Promise<void>, brokerPid: number): Promise<Figures> {
  for (let i = 0; i < 50; i++) await fn(-1 - i);
  const lat: number[] = [];
  const u0 = process.cpuUsage();
  const b0 = await processCpuMs(brokerPid);
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await fn(i);
    lat.push(performance.now() - t);
    if ((i + 1) % Math.max(1, Math.floor(N / 4)) === 0) log(`   ${i + 1}/${N}`);
  }
  const u = process.cpuUsage(u0);
  const b = (await processCpuMs(brokerPid)) - b0;
  return { clientMs: (u.user + u.system) / 1_000 / N, brokerMs: b / N, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

const broker = await startScratchBroker();
try {
  const kafka = new Kafka({ clientId: "bench-admin", brokers: [broker.brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const brokerPid = (await pidListeningOn(Number(broker.brokers.split(":")[1])))!;
  const rows: string[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const makers = [kafkajsClient, platformaticClient];
    for (const make of round % 2 === 1 ? makers : makers.reverse()) {
      const topic = `t-${round}-${make.name}`;
      await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
      const client = await make(broker.brokers, topic, round);
      // Let the group settle (first fetches, the first heartbeat) before counting.
      await new Promise((r) => setTimeout(r, 2_000));
      log(`==> round ${round}, ${client.name}: produce`);
      const p = await measure((i) => client.produce(i), brokerPid);
      log(`==> round ${round}, ${client.name}: produce + consume (round trip)`);
      const rt = await measure((i) => client.roundTrip(i), brokerPid);
      await client.close();
      for (const [leg, f] of [
        ["produce", p],
        ["round trip", rt],
      ] as const)
        rows.push(
          `| ${round} | ${client.name} | ${leg} | ${f.clientMs.toFixed(3)} | ${f.brokerMs.toFixed(3)} | ${(f.clientMs + f.brokerMs).toFixed(3)} | ${f.p50.toFixed(2)} / ${f.p99.toFixed(2)} |`,
        );
    }
  }
  await admin.disconnect();
  console.log(`\nKafka clients side by side, one request at a time, ${N} per measure, one 1.5 KB record, idempotent acks=all, scratch broker\n`);
  console.log("| round | client | leg | client CPU ms | broker CPU ms | total | latency p50 / p99 ms |");
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) console.log(r);
} finally {
  await broker.stop();
}
