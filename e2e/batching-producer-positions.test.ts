/**
 * The batching producer says where the broker wrote each record that named its partition (the
 * worker logs it for every result it puts on a reply topic, so a result a gateway never reads can
 * be looked up in the partition). Records sent together share one request: each partition's
 * records take consecutive offsets from the base offset the broker answered. A record that names
 * no partition gets the one the partitioner chose for it.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { createBatchingProducer, createLogger, type RecordPosition } from "@shoal/common";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { kafkaBrokers } from "./harness/cluster.ts";

describe("batching producer: the position of each record (real broker)", () => {
  const topic = `positions-${randomBytes(4).toString("hex")}`;
  const kafka = new Kafka({ clientId: "e2e-positions", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  let admin: Admin;
  before(async () => {
    admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
  });
  after(async () => {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  test("records sent together get their own offsets, per partition; a record without a partition gets the one the partitioner chose; the offsets hold those records", async () => {
    const producer = createBatchingProducer(kafka, createLogger("e2e-positions", "silent"), { name: "positions-producer" });
    await producer.connect();
    try {
      // One record first, so the burst behind it goes out as one request starting at offset 1 of partition 1.
      const first = await producer.send(topic, { key: "p1-first", value: "first", partition: 1 });
      assert.deepEqual(first, { partition: 1, offset: "0" });
      const sends: Array<[string, Promise<RecordPosition | undefined>]> = [];
      for (let i = 0; i < 5; i++) sends.push([`p1-${i}`, producer.send(topic, { key: `p1-${i}`, value: `v${i}`, partition: 1 })]);
      for (let i = 0; i < 3; i++) sends.push([`p0-${i}`, producer.send(topic, { key: `p0-${i}`, value: `v${i}`, partition: 0 })]);
      const unplaced = producer.send(topic, { key: "anywhere", value: "x" });
      const positions = new Map<string, RecordPosition | undefined>();
      for (const [key, p] of sends) positions.set(key, await p);
      const placed = await unplaced;
      assert.ok(placed !== undefined && (placed.partition === 0 || placed.partition === 1), `the partitioner's record: ${JSON.stringify(placed)}`);
      positions.set("anywhere", placed);
      assert.deepEqual(
        [0, 1, 2, 3, 4].map((i) => positions.get(`p1-${i}`)),
        [1, 2, 3, 4, 5].map((o) => ({ partition: 1, offset: String(o) })),
      );
      // The record without a partition may have gone to partition 0 before or after these three.
      const p0 = [0, 1, 2].map((i) => positions.get(`p0-${i}`)!);
      assert.ok(
        p0.every((p) => p.partition === 0),
        JSON.stringify(p0),
      );
      assert.deepEqual(
        p0.map((p) => Number(p.offset) - Number(p0[0]!.offset)),
        [0, 1, 2],
        "consecutive in send order",
      );

      // What the broker holds at those offsets is what was sent there.
      const consumer = kafka.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 100 });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const held = new Map<string, string>();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`read ${held.size} of 10 records in 20 s`)), 20_000);
        void consumer.run({
          eachMessage: async ({ partition, message }) => {
            held.set(`${partition}@${message.offset}`, message.key!.toString());
            if (held.size === 10) {
              clearTimeout(timer);
              resolve();
            }
          },
        });
      });
      await consumer.disconnect();
      for (const [key, at] of positions) assert.equal(held.get(`${at!.partition}@${at!.offset}`), key);
      assert.equal(held.get("1@0"), "p1-first");
    } finally {
      await producer.disconnect();
    }
  });
});
