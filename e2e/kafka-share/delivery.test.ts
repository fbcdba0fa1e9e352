/**
 * A share group on a real broker: every member reads the same partition, and maxRecords limits
 * what one member acquires even inside a single producer batch (ShareFetch v2 record-limit mode).
 */
import assert from "node:assert/strict";
import { after, afterEach, test } from "node:test";
import type { ShareConsumer, ShareRecord } from "@shoal/kafka-share";
import { Kafka, logLevel } from "kafkajs";
import { assigned, brokers, closeAll, consumerFor, createTopic, disconnectProducer, produce, unique, values } from "./helpers.ts";

afterEach(closeAll);
after(disconnectProducer);

/** Runs every consumer's fetch loop at once until `total` records were accepted between them. */
async function shareOut(consumers: ShareConsumer[], total: number, maxRecords: number): Promise<ShareRecord[][]> {
  const got: ShareRecord[][] = consumers.map(() => []);
  const deadline = Date.now() + 30_000;
  const count = (): number => got.reduce((n, g) => n + g.length, 0);
  await Promise.all(
    consumers.map(async (c, i) => {
      while (count() < total && Date.now() < deadline) {
        const batch = await c.fetch({ maxRecords, maxWaitMs: 300 });
        assert.ok(batch.length <= maxRecords, `member ${i} got ${batch.length} > maxRecords ${maxRecords}`);
        for (const r of batch) c.acknowledge(r, "accept");
        got[i]!.push(...batch);
        // Work takes time: without it one member can drain a short queue before the others ask.
        if (batch.length > 0) await new Promise((r) => setTimeout(r, 20));
      }
    }),
  );
  return got;
}

test("two consumers on a one-partition topic both receive records, none twice", async () => {
  const topic = unique("share-two");
  const group = unique("g");
  await createTopic(topic, 1);
  const consumers = [consumerFor(group, topic), consumerFor(group, topic)];
  await Promise.all(consumers.map((c) => assigned(c)));
  for (let i = 0; i < 10; i++) await produce(topic, 20);
  const got = await shareOut(consumers, 200, 10);
  assert.equal(got.flat().length, 200);
  assert.equal(new Set(got.flat().map((r) => r.offset)).size, 200, "no offset delivered twice");
  for (const [i, g] of got.entries()) assert.ok(g.length > 0, `consumer ${i} received nothing`);
  console.error(`records per consumer: ${got.map((g) => g.length).join(", ")}`);
});

test("four consumers share a one-partition topic", async () => {
  const topic = unique("share-four");
  const group = unique("g");
  await createTopic(topic, 1);
  const consumers = Array.from({ length: 4 }, () => consumerFor(group, topic));
  await Promise.all(consumers.map((c) => assigned(c)));
  for (let i = 0; i < 20; i++) await produce(topic, 20);
  const got = await shareOut(consumers, 400, 5);
  assert.equal(new Set(got.flat().map((r) => r.offset)).size, 400, "every record once");
  for (const [i, g] of got.entries()) assert.ok(g.length > 0, `consumer ${i} received nothing`);
  console.error(`records per consumer: ${got.map((g) => g.length).join(", ")}`);
});

test("maxRecords splits one 100-record producer batch between two consumers (v2 record-limit acquire mode)", async () => {
  const topic = unique("share-split");
  const group = unique("g");
  await createTopic(topic, 1);
  const a = consumerFor(group, topic);
  const b = consumerFor(group, topic);
  await Promise.all([assigned(a), assigned(b)]);
  await produce(topic, 100); // one send = one producer batch of 100 records
  let first: ShareRecord[] = [];
  for (let i = 0; i < 20 && first.length === 0; i++) first = await a.fetch({ maxRecords: 10, maxWaitMs: 500 });
  assert.equal(first.length, 10, "the first member acquires exactly maxRecords of the batch");
  assert.equal(a.metrics().sessions[0]?.version, 2, "ShareFetch v2 was negotiated");
  const second = await b.fetch({ maxRecords: 10, maxWaitMs: 2_000 });
  assert.equal(second.length, 10, "the second member gets records of the same batch at once");
  const offsetsA = new Set(first.map((r) => r.offset));
  assert.ok(
    second.every((r) => !offsetsA.has(r.offset)),
    "no record acquired twice",
  );
  assert.deepEqual(
    values(first),
    Array.from({ length: 10 }, (_, i) => i),
  );
  assert.deepEqual(
    values(second),
    Array.from({ length: 10 }, (_, i) => i + 10),
  );
});

test("maxBytes bounds the records a fetch acquires by their size (one record per batch); the first batch always comes whole", async () => {
  const topic = unique("share-bytes");
  const group = unique("g");
  await createTopic(topic, 1);
  const c = consumerFor(group, topic);
  await assigned(c);
  // Ten records of 1,000 bytes, each sent alone (one batch each), as the gateway writes jobs.
  const kafka = new Kafka({ clientId: "share-bytes-test", brokers, logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let i = 0; i < 10; i++) await producer.send({ topic, messages: [{ value: `${i}`.padEnd(1_000, "x") }] });
  await producer.disconnect();
  // A budget of about two and a half records' bytes: two or three records, not all ten.
  let first: ShareRecord[] = [];
  for (let i = 0; i < 20 && first.length === 0; i++) first = await c.fetch({ maxRecords: 10, maxWaitMs: 500, maxBytes: 2_600 });
  assert.ok(first.length >= 2 && first.length <= 3, `a 2,600-byte fetch acquired ${first.length} records of 1,000 bytes`);
  // One byte: still the next batch whole (a fetch with records waiting is never empty).
  const one = await c.fetch({ maxRecords: 10, maxWaitMs: 500, maxBytes: 1 });
  assert.equal(one.length, 1, "a 1-byte fetch acquires the next record whole");
  // No limit but maxRecords: the rest.
  const rest = await c.fetch({ maxRecords: 10, maxWaitMs: 500 });
  assert.equal(first.length + one.length + rest.length, 10, "every record once");
  assert.deepEqual(
    [...first, ...one, ...rest].map((r) => Number(r.value!.toString().replace(/x+$/, ""))),
    Array.from({ length: 10 }, (_, i) => i),
  );
  await assert.rejects(c.fetch({ maxRecords: 1, maxWaitMs: 0, maxBytes: 0 }), /maxBytes must be a positive integer/);
});
