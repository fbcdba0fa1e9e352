/**
 * A broker restart under a share consumer: it must reconnect, find the coordinator again, start a
 * new share session (the old one died with the broker) and keep delivering, without a new
 * consumer. Uses its own scratch broker so the run's shared broker is never stopped.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Kafka, logLevel } from "kafkajs";
import { createShareConsumer } from "@shoal/kafka-share";
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { drain, unique, values } from "./helpers.ts";

let broker: ScratchBroker;
before(async () => {
  broker = await startScratchBroker();
});
after(async () => {
  await broker?.stop();
});

test("a broker restart: the consumer reconnects, opens a new share session and keeps delivering", async () => {
  const kafka = new Kafka({ clientId: "kafka-share-restart", brokers: [broker.brokers], logLevel: logLevel.NOTHING });
  const topic = unique("share-restart");
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const send = async (from: number, to: number): Promise<void> => {
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic, messages: Array.from({ length: to - from }, (_, i) => ({ value: String(from + i) })) });
    await producer.disconnect();
  };

  const consumer = createShareConsumer({
    brokers: [broker.brokers],
    groupId: unique("g"),
    clientId: "restart-test",
    groupConfig: { autoOffsetReset: "earliest" },
    requestTimeoutMs: 5_000,
  });
  const problems: string[] = [];
  consumer.on("problem", ({ error, action }) => problems.push(`${error.message} → ${action}`));
  try {
    consumer.subscribe([topic]);
    await send(0, 5);
    assert.deepEqual(values(await drain(consumer, 5, { ack: "accept" })), [0, 1, 2, 3, 4]);
    await consumer.flush();

    await broker.pause();
    const during = await consumer.fetch({ maxRecords: 10, maxWaitMs: 1_000 }); // must not throw
    assert.deepEqual(during, []);
    await broker.resume();
    await send(5, 10);

    const t0 = Date.now();
    const after = await drain(consumer, 5, { ack: "accept", timeoutMs: 60_000 });
    assert.deepEqual(values(after), [5, 6, 7, 8, 9], "only the new records: the accepted ones stay accepted");
    assert.ok(problems.length > 0, "the outage was noticed");
    assert.ok(consumer.metrics().memberEpoch > 0, "still a member");
    console.error(`delivering again ${Date.now() - t0} ms after the restart; problems handled:\n  ${[...new Set(problems)].slice(0, 8).join("\n  ")}`);
  } finally {
    await consumer.close();
  }
});
