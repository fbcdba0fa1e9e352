/**
 * shareGroupHeads (createLagReader) against a real broker: per topic, how many records a share
 * group has not settled and when the oldest of them was written. The share intake's busy workers
 * take the model topic with the oldest head first (SHOAL_SHARE_HEADS_MS); these are the facts
 * that order rests on: the head moves as the group acknowledges, a record acquired but not yet
 * acknowledged is still the head, and reading heads takes nothing from the group.
 */
import assert from "node:assert/strict";
import { after, afterEach, test } from "node:test";
import { Kafka, logLevel } from "kafkajs";
import { createLagReader, type QueueHead } from "@shoal/kafka-share";
import { assigned, brokers, closeAll, consumerFor, createTopic, drain } from "./helpers.ts";

const reader = createLagReader({ brokers, clientId: "heads-test" });
const kafka = new Kafka({ clientId: "heads-test-producer", brokers, logLevel: logLevel.NOTHING });
const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
const unique = (prefix: string): string => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

afterEach(closeAll);
after(async () => {
  await reader.close();
  await producer.disconnect();
});

/** One record per send (one batch each), written with the given CreateTime. */
async function produceAt(topic: string, timestamps: readonly number[]): Promise<void> {
  for (const [i, ts] of timestamps.entries()) await producer.send({ topic, messages: [{ value: String(i), timestamp: String(ts) }] });
}

/** Reads heads until `check` passes (acknowledgements reach the share coordinator's state asynchronously); at most 10 s. */
async function headsReach(group: string, topics: string[], want: Record<string, QueueHead>): Promise<void> {
  const deadline = Date.now() + 10_000;
  let last = "";
  for (;;) {
    const got = Object.fromEntries(await reader.shareGroupHeads(group, topics));
    last = JSON.stringify(got);
    if (Object.entries(want).every(([t, h]) => JSON.stringify(got[t]) === JSON.stringify(h))) return;
    if (Date.now() > deadline) assert.fail(`heads: wanted ${JSON.stringify(want)}, last ${last}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the head is the oldest record not acknowledged (an acquired one included); it moves as the group acknowledges", async () => {
  await producer.connect();
  const a = unique("heads-a");
  const b = unique("heads-b");
  await createTopic(a);
  await createTopic(b);
  const base = Date.now() - 60_000;
  await produceAt(a, [base + 10, base + 20, base + 30]);
  await produceAt(b, [base + 5, base + 15, base + 40]);
  const group = unique("g");

  // No state yet (nothing acknowledged): the records wait, but no start offset says where the head is.
  assert.deepEqual(Object.fromEntries(await reader.shareGroupHeads(group, [a, b])), { [a]: { waiting: 3 }, [b]: { waiting: 3 } });

  const c = consumerFor(group, [a, b]);
  await assigned(c);
  await drain(c, 1, { maxRecords: 1, ack: "accept", topics: [a] });
  await drain(c, 1, { maxRecords: 1, ack: "accept", topics: [b] });
  await c.flush();
  await headsReach(group, [a, b], { [a]: { waiting: 2, oldestMs: base + 20 }, [b]: { waiting: 2, oldestMs: base + 15 } });

  // b's next record taken and held (not acknowledged): still b's head, still counted.
  const held = await drain(c, 1, { maxRecords: 1, topics: [b] });
  assert.equal(held.length, 1);
  await headsReach(group, [a, b], { [a]: { waiting: 2, oldestMs: base + 20 }, [b]: { waiting: 2, oldestMs: base + 15 } });

  // Acknowledged: b's head moves to its last record, now newer than a's.
  c.acknowledge(held[0]!, "accept");
  await c.flush();
  await headsReach(group, [a, b], { [a]: { waiting: 2, oldestMs: base + 20 }, [b]: { waiting: 1, oldestMs: base + 40 } });

  // Reading heads took nothing: the group still gets a's two records.
  const rest = await drain(c, 2, { ack: "accept", topics: [a] });
  await c.flush();
  assert.deepEqual(
    rest.map((r) => r.value?.toString()),
    ["1", "2"],
  );
  await headsReach(group, [a, b], { [a]: { waiting: 0 }, [b]: { waiting: 1, oldestMs: base + 40 } });
});
