/**
 * kafkajs with the native CRC-32C that `createKafka` installs (issue #52): the broker checks every
 * record batch's CRC on produce (a wrong one is CORRUPT_MESSAGE), so records of the sizes the
 * services send — one large, many small — are accepted and read back unchanged.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, mock, test } from "node:test";
import crc32 from "@node-rs/crc32";
import { createBatchingProducer, createLogger, useNativeKafkajsCrc } from "@shoal/common";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { kafkaBrokers } from "./harness/cluster.ts";

describe("kafkajs with the native CRC-32C (real broker)", () => {
  const topic = `native-crc-${randomBytes(4).toString("hex")}`;
  // Before any Produce request of this process, as createKafka does it.
  useNativeKafkajsCrc();
  const kafka = new Kafka({ clientId: "e2e-native-crc", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  let admin: Admin;
  before(async () => {
    admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  });
  after(async () => {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  test("a 900 KiB record and 1,000 small ones sent together are accepted by the broker and read back unchanged", async () => {
    const crc = mock.method(crc32, "crc32c");
    const values = new Map<string, Buffer>([["large", randomBytes(900 * 1024)]]);
    for (let i = 0; i < 1000; i++) values.set(`small-${i}`, randomBytes(1 + (i % 300)));
    const producer = createBatchingProducer(kafka, createLogger("e2e-native-crc", "silent"), { name: "native-crc-producer" });
    await producer.connect();
    try {
      await Promise.all([...values].map(([key, value]) => producer.send(topic, { key, value })));
    } finally {
      await producer.disconnect();
      crc.mock.restore();
    }
    assert.ok(crc.mock.callCount() >= 1, "the record batches' CRCs came from the native function");

    const consumer = kafka.consumer({ groupId: `${topic}-reader`, maxWaitTimeInMs: 100, maxBytesPerPartition: 4 * 1024 * 1024 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const read = new Map<string, Buffer>();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`read ${read.size} of ${values.size} records in 20 s`)), 20_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          read.set(message.key!.toString(), message.value!);
          if (read.size === values.size) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    await consumer.disconnect();
    for (const [key, value] of values) assert.ok(read.get(key)?.equals(value), key);
  });
});
