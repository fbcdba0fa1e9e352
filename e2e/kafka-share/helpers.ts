/**
 * Shared setup for the share-consumer tests: the run's broker (KAFKA_BROKERS, set by
 * infra/dev/test.ts), a fresh topic and group per test, a kafkajs producer (the same client
 * Shoal's gateway produces with), and a consumer factory that closes what it made.
 */
import { randomUUID } from "node:crypto";
import { Kafka, logLevel, type Producer } from "kafkajs";
import { createShareConsumer, type ShareConsumer, type ShareConsumerOptions, type ShareRecord } from "@shoal/kafka-share";
import { kafkaBrokers } from "../harness/cluster.ts";

export const brokers = kafkaBrokers().split(",");

const kafka = new Kafka({ clientId: "kafka-share-tests", brokers, logLevel: logLevel.NOTHING });

/** A unique name per test: no state shared between tests. */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export async function createTopic(topic: string, partitions = 1): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

let producer: Producer | undefined;

/**
 * Produces `count` records (values "0".."count-1", keys "k<i>") in ONE send: kafkajs writes them
 * as one record batch per partition, i.e. one producer batch, the unit ShareFetch v1 acquires.
 */
export async function produce(topic: string, count: number, partition = 0): Promise<void> {
  if (!producer) {
    producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
  }
  await producer.send({
    topic,
    messages: Array.from({ length: count }, (_, i) => ({ key: `k${i}`, value: String(i), partition, headers: { n: String(i) } })),
  });
}

export async function disconnectProducer(): Promise<void> {
  await producer?.disconnect();
  producer = undefined;
}

/** Consumers made by {@link consumerFor}; {@link closeAll} closes any the test left open. */
const open = new Set<ShareConsumer>();

export function consumerFor(groupId: string, topic: string | readonly string[], extra: Partial<ShareConsumerOptions> = {}): ShareConsumer {
  const consumer = createShareConsumer({
    brokers,
    groupId,
    clientId: unique("c"),
    groupConfig: { autoOffsetReset: "earliest" },
    ...extra,
  });
  consumer.subscribe(typeof topic === "string" ? [topic] : topic);
  open.add(consumer);
  return consumer;
}

export async function closeAll(): Promise<void> {
  await Promise.all([...open].map((c) => c.close().catch(() => {})));
  open.clear();
}

/** Fetches until `want` records arrived or `timeoutMs` passed; acks each with `ack` if given. */
export async function drain(
  consumer: ShareConsumer,
  want: number,
  opts: { timeoutMs?: number; maxRecords?: number; ack?: "accept" | "release" | "reject"; topics?: readonly string[] } = {},
): Promise<ShareRecord[]> {
  const got: ShareRecord[] = [];
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  while (got.length < want && Date.now() < deadline) {
    const batch = await consumer.fetch({
      ...(opts.topics ? { topics: opts.topics } : {}),
      maxRecords: opts.maxRecords ?? 500,
      maxWaitMs: Math.min(1_000, Math.max(1, deadline - Date.now())),
    });
    for (const r of batch) {
      got.push(r);
      if (opts.ack) consumer.acknowledge(r, opts.ack);
    }
  }
  return got;
}

export function values(records: readonly ShareRecord[]): number[] {
  return records.map((r) => Number(r.value?.toString())).sort((a, b) => a - b);
}

/** Resolves once the consumer has partitions assigned (share groups assign on a heartbeat). */
export async function assigned(consumer: ShareConsumer, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (consumer.metrics().assignment.length === 0) {
    if (Date.now() > deadline) throw new Error(`no assignment within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Fetches for `ms` and returns whatever arrived (to show that nothing does). */
export async function fetchFor(consumer: ShareConsumer, ms: number): Promise<ShareRecord[]> {
  const got: ShareRecord[] = [];
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) got.push(...(await consumer.fetch({ maxRecords: 100, maxWaitMs: Math.max(1, Math.min(500, deadline - Date.now())) })));
  return got;
}
