/**
 * describeShareGroupOffsets (DescribeShareGroupOffsets v1, KIP-1226 lag) against a real broker:
 * what the share coordinator reports before, during and after a member works through a topic.
 * The facts pinned here are the ones the gateway's lane-lag monitor relies on.
 */
import assert from "node:assert/strict";
import { after, afterEach, test } from "node:test";
import { createShareGroupAdmin, describeShareGroupOffsets, type ShareGroupPartitionOffsets } from "@shoal/kafka-share";
import { assigned, brokers, closeAll, consumerFor, createTopic, disconnectProducer, drain, produce, unique } from "./helpers.ts";

/** One admin kept open across calls, as the gateway polls; the one-shot function is tested too. */
const admin = createShareGroupAdmin({ brokers });

afterEach(closeAll);
after(disconnectProducer);
after(() => admin.close());

async function partition0(group: string, topic: string): Promise<ShareGroupPartitionOffsets> {
  const parts = await admin.describeShareGroupOffsets(group, [topic]);
  assert.equal(parts.length, 1);
  return parts[0]!;
}

/** Describes until the lag reads `want` (acks are persisted by the share coordinator); at most 10 s. */
async function lagReaches(group: string, topic: string, want: bigint): Promise<ShareGroupPartitionOffsets> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const p = await partition0(group, topic);
    if (p.lag === want || Date.now() > deadline) {
      assert.equal(p.lag, want, `lag of ${topic}-0: ${JSON.stringify({ ...p, startOffset: String(p.startOffset), lag: String(p.lag) })}`);
      return p;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("a group that never existed: no partitions without topics, start offset -1 and no lag with them", async () => {
  const topic = unique("offsets-none");
  await createTopic(topic, 2);
  const group = unique("g");
  assert.deepEqual(await describeShareGroupOffsets({ brokers }, group), []);
  const parts = await describeShareGroupOffsets({ brokers }, group, [topic]);
  assert.deepEqual(
    parts.map((p) => [p.topic, p.partition, p.startOffset, p.lag]),
    [
      [topic, 0, -1n, undefined],
      [topic, 1, -1n, undefined],
    ],
  );
});

test("lag counts records not yet acknowledged, acquired ones included; before the first ack there is no state", async () => {
  const topic = unique("offsets-lag");
  const group = unique("g");
  await createTopic(topic, 1);
  await produce(topic, 10);
  const c = consumerFor(group, topic);
  await assigned(c);

  const held = await drain(c, 4, { maxRecords: 4 });
  assert.equal(held.length, 4);
  // Acquisitions live in the partition leader's memory; the share coordinator has nothing persisted
  // until the first acknowledgement: no start offset, no lag (-1 on the wire).
  const before = await partition0(group, topic);
  assert.equal(before.startOffset, -1n);
  assert.equal(before.lag, undefined);

  for (const r of held.slice(0, 3)) c.acknowledge(r, "accept");
  await c.flush();
  // 10 produced − 3 accepted: the 4th record, acquired and unacknowledged, is still lag.
  const afterAccept = await lagReaches(group, topic, 7n);
  assert.ok(afterAccept.startOffset >= 0n && afterAccept.startOffset <= 3n, `start offset ${afterAccept.startOffset}`);

  c.acknowledge(held[3]!, "release");
  await c.flush();
  await lagReaches(group, topic, 7n); // released: available again, still waiting

  const rest = await drain(c, 7, { maxRecords: 10 });
  assert.deepEqual(
    rest.map((r) => r.offset),
    [3n, 4n, 5n, 6n, 7n, 8n, 9n],
  );
  for (const r of rest) if (r.offset >= 6n) c.acknowledge(r, "accept");
  await c.flush();
  await lagReaches(group, topic, 3n); // 3..5 acquired, not done
  for (const r of rest) if (r.offset < 6n) c.acknowledge(r, "reject");
  await c.flush();
  const done = await lagReaches(group, topic, 0n); // rejected records are done too
  assert.ok(done.startOffset <= 10n);

  await produce(topic, 5);
  await lagReaches(group, topic, 5n); // new records count at once, with no member fetching
  await c.close();
  await lagReaches(group, topic, 5n); // and the state outlives the members
  const all = await describeShareGroupOffsets({ brokers }, group);
  assert.deepEqual(
    all.map((p) => [p.topic, p.partition, p.lag]),
    [[topic, 0, 5n]],
  );
});
