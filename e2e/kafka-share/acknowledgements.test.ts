/**
 * Acknowledgements, locks and membership on a real broker: release, reject, a crashed member's
 * lock expiring, the delivery-count limit, renew, an ack after expiry, and a clean leave.
 * Lock durations of 2 s rely on the broker's group.share.min.record.lock.duration.ms=1000.
 */
import assert from "node:assert/strict";
import { after, afterEach, test } from "node:test";
import { describeShareGroup, type AcknowledgeResult, type ShareConsumer } from "@shoal/kafka-share";
import { assigned, brokers, closeAll, consumerFor, createTopic, disconnectProducer, drain, fetchFor, produce, unique } from "./helpers.ts";

afterEach(closeAll);
after(disconnectProducer);

/** A topic with one record, and two members of a fresh group that both have the partition. */
async function setup(groupConfig: Record<string, number> = {}): Promise<{ topic: string; group: string; a: ShareConsumer; b: ShareConsumer }> {
  const topic = unique("share-acks");
  const group = unique("g");
  await createTopic(topic, 1);
  const config = { autoOffsetReset: "earliest" as const, ...groupConfig };
  const a = consumerFor(group, topic, { groupConfig: config });
  await assigned(a);
  const b = consumerFor(group, topic, { groupConfig: config });
  await assigned(b);
  await produce(topic, 1);
  return { topic, group, a, b };
}

function results(consumer: ShareConsumer): AcknowledgeResult[] {
  const seen: AcknowledgeResult[] = [];
  consumer.on("acknowledged", (r) => seen.push(r));
  return seen;
}

test("release: the record goes at once to another member, deliveryCount 2", async () => {
  const { a, b } = await setup(); // default 30 s lock: a quick redelivery can only be the release
  const [first] = await drain(a, 1);
  assert.equal(first?.deliveryCount, 1);
  a.acknowledge(first!, "release");
  const t0 = Date.now();
  await a.flush();
  const [again] = await drain(b, 1, { timeoutMs: 5_000 });
  assert.equal(again?.offset, first!.offset);
  assert.equal(again?.deliveryCount, 2);
  console.error(`released record redelivered to the other member after ${Date.now() - t0} ms`);
});

test("reject: the record is never delivered again", async () => {
  const { a, b } = await setup({ recordLockDurationMs: 2_000 });
  const acked = results(a);
  const [first] = await drain(a, 1);
  a.acknowledge(first!, "reject");
  await a.flush();
  assert.equal(acked.length, 1);
  assert.equal(acked[0]?.error, undefined);
  const later = [...(await fetchFor(b, 3_500)), ...(await fetchFor(a, 500))];
  assert.deepEqual(later, [], "a rejected record stays archived, past the lock duration too");
});

test("a member that dies without acking: its socket closing releases its records at once", async () => {
  // Verified on 4.4: the broker ties a share session to its connection and releases the records
  // acquired in it when the connection closes, so a crashed process (the OS closes its sockets)
  // costs no lock wait. The lock only matters while the connection stays open (next test).
  const { a, b } = await setup({ recordLockDurationMs: 2_000 });
  const [first] = await drain(a, 1);
  const t0 = Date.now();
  await a.destroy(); // sockets closed: no ack, no session close, no leave heartbeat
  const [again] = await drain(b, 1, { timeoutMs: 10_000 });
  assert.equal(again?.offset, first!.offset);
  assert.equal(again?.deliveryCount, 2);
  console.error(`redelivered ${Date.now() - t0} ms after the holder's sockets closed (lock 2000 ms)`);
});

test("a member that hangs without acking: its record is redelivered once the lock expires", async () => {
  const { a, b } = await setup({ recordLockDurationMs: 2_000 });
  const [first] = await drain(a, 1);
  const t0 = Date.now(); // a keeps its connection and heartbeats, but never acks or fetches again
  const [again] = await drain(b, 1, { timeoutMs: 10_000 });
  const ms = Date.now() - t0;
  assert.equal(again?.offset, first!.offset);
  assert.equal(again?.deliveryCount, 2);
  assert.ok(ms >= 1_500, `redelivered after ${ms} ms: sooner than the 2 s lock allows`);
  console.error(`redelivered ${ms} ms after acquisition by a hung member (lock 2000 ms)`);
});

test("delivery-count limit: after the last allowed delivery the record is archived", async () => {
  const { a } = await setup({ deliveryCountLimit: 2 });
  for (const expected of [1, 2]) {
    const [r] = await drain(a, 1, { timeoutMs: 5_000 });
    assert.equal(r?.deliveryCount, expected);
    a.acknowledge(r!, "release");
  }
  await a.flush();
  assert.deepEqual(await fetchFor(a, 2_000), [], "no third delivery");
});

test("renew keeps a record's lock past its duration", async () => {
  const { a, b } = await setup({ recordLockDurationMs: 2_000 });
  const acked = results(a);
  const [held] = await drain(a, 1);
  const t0 = Date.now();
  const stolen = fetchFor(b, 5_000);
  while (Date.now() - t0 < 5_000) {
    await new Promise((r) => setTimeout(r, 1_000));
    await a.renew(held!);
  }
  assert.deepEqual(await stolen, [], "no other member got the record while its lock was renewed");
  a.acknowledge(held!, "accept");
  await a.flush();
  const accept = acked.at(-1);
  assert.equal(accept?.error, undefined, `accept after ${Date.now() - t0} ms with a 2 s lock: ${accept?.error?.message}`);
});

test("an ack after the lock expired fails visibly, and the consumer carries on", async () => {
  const { a, topic } = await setup({ recordLockDurationMs: 2_000 });
  const acked = results(a);
  const [held] = await drain(a, 1);
  await new Promise((r) => setTimeout(r, 3_000));
  a.acknowledge(held!, "accept");
  await a.flush();
  const failed = acked.find((r) => r.error);
  assert.ok(failed?.error, "the expired ack is reported");
  console.error(`expired ack: ${failed.error.message}`);
  await produce(topic, 1);
  const next = await drain(a, 1, { timeoutMs: 5_000, ack: "accept" });
  assert.ok(next.length >= 1, "the consumer still fetches");
});

test("close() leaves the group at once (ShareGroupDescribe no longer lists the member)", async () => {
  const { group, a, b } = await setup();
  const before = await describeShareGroup({ brokers }, group);
  assert.deepEqual(new Set(before.members.map((m) => m.memberId)), new Set([a.memberId, b.memberId]));
  await a.close();
  const afterClose = await describeShareGroup({ brokers }, group);
  assert.deepEqual(
    afterClose.members.map((m) => m.memberId),
    [b.memberId],
  );
  assert.equal(a.metrics().memberEpoch, -1);
});

test("a waiting fetch is answered as soon as a record arrives, not at its maxWaitMs", async () => {
  const topic = unique("share-wait");
  const group = unique("g");
  await createTopic(topic, 1);
  const a = consumerFor(group, topic);
  await assigned(a);
  const waiting = a.fetch({ maxRecords: 1, maxWaitMs: 10_000 });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  await produce(topic, 1);
  const got = await waiting;
  const ms = Date.now() - t0;
  assert.equal(got.length, 1);
  assert.ok(ms < 2_000, `answered ${ms} ms after the produce (maxWaitMs 10 s)`);
  console.error(`a fetch waiting 10 s answered ${ms} ms after the record was produced`);
});

test("a release does not wake a fetch already waiting (4.4): the released record goes out when that wait ends", async () => {
  // Why the worker's idle waits are short (SHOAL_SHARE_IDLE_WAIT_MS, 100 ms): a job a worker gives
  // back for an idle one reaches the idle worker's waiting fetch only when its wait runs out.
  // New records do wake it (above). If a Kafka release changes this, the bound can go.
  const { a, b } = await setup();
  const [first] = await drain(a, 1);
  const waitMs = 1_500;
  const sent = Date.now();
  const waiting = b.fetch({ maxRecords: 1, maxWaitMs: waitMs });
  await new Promise((r) => setTimeout(r, 300));
  a.acknowledge(first!, "release");
  await a.flush(); // a ShareAcknowledge of its own, answered before the wait ends
  const released = Date.now();
  const got = await waiting;
  const ended = Date.now();
  assert.equal(got[0]?.offset, first!.offset, "the waiting fetch brings the released record");
  assert.equal(got[0]?.deliveryCount, 2);
  assert.ok(ended - sent >= waitMs - 100, `answered ${ended - sent} ms after it was sent, ${ended - released} ms after the release (maxWaitMs ${waitMs})`);
  console.error(`released record reached a fetch already waiting ${ended - released} ms after the release (${ended - sent} of ${waitMs} ms)`);
});

test("a record written after a release wakes a fetch already waiting, and that fetch takes the released record first", async () => {
  // What the worker's wake-up marker (WAKE_HEADER) relies on: see the test above.
  const { topic, a, b } = await setup();
  const [first] = await drain(a, 1);
  const waiting = b.fetch({ maxRecords: 1, maxWaitMs: 10_000 });
  await new Promise((r) => setTimeout(r, 300));
  a.acknowledge(first!, "release");
  await a.flush();
  const released = Date.now();
  await produce(topic, 1); // the marker: offset 1
  const got = await waiting;
  const ms = Date.now() - released;
  assert.deepEqual(
    got.map((r) => [r.offset, r.deliveryCount]),
    [[first!.offset, 2]],
  );
  assert.ok(ms < 2_000, `answered ${ms} ms after the release (maxWaitMs 10 s)`);
  const [marker] = await drain(b, 1, { timeoutMs: 5_000 });
  assert.equal(marker?.offset, first!.offset + 1n);
  console.error(`a waiting fetch took the released record ${ms} ms after the release once a record followed it`);
});

test("an ack queued while a fetch waits rides the next fetch (no ShareAcknowledge of its own)", async () => {
  const { topic, a } = await setup();
  const acked = results(a);
  const [first] = await drain(a, 1);
  const waiting = a.fetch({ maxRecords: 1, maxWaitMs: 500 });
  // Queued once the fetch is at the broker (one queued before it is sent rides it).
  await new Promise((r) => setTimeout(r, 150));
  a.acknowledge(first!, "accept");
  assert.deepEqual(await waiting, []);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(acked.length, 0, "not sent when the waiting fetch ended");
  await produce(topic, 1);
  await drain(a, 1, { ack: "accept" });
  assert.equal(acked[0]?.offsets[0], first!.offset, "the next fetch carried it");
  assert.equal(acked[0]?.error, undefined);
});

test("close() cuts a waiting fetch that carries no acks short; a record that fetch takes after is freed for the others", async () => {
  const { topic, a, b } = await setup();
  await drain(b, 1, { ack: "accept" });
  await b.flush();
  const problems: unknown[] = [];
  a.on("problem", (p) => problems.push(p));
  const waiting = a.fetch({ maxRecords: 1, maxWaitMs: 20_000 });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  await a.close();
  const closeMs = Date.now() - t0;
  assert.deepEqual(await waiting, []);
  assert.ok(closeMs < 3_000, `close took ${closeMs} ms with a fetch waiting 20 s`);
  assert.deepEqual(problems, [], "a fetch cut short by close() is not a problem");
  const t1 = Date.now();
  await produce(topic, 1);
  const [next] = await drain(b, 1, { timeoutMs: 5_000 });
  console.error(
    `close() with a fetch waiting 20 s took ${closeMs} ms; a record produced after it reached the other member in ${Date.now() - t1} ms, delivery ${next?.deliveryCount}`,
  );
  // The broker still completes the cut fetch (Kafka 4.4): it may acquire the record for the gone
  // session, and gives it back at once (a second delivery), as for a member that died.
  assert.ok(next !== undefined && next.deliveryCount <= 2, "the new record reached the other member");
});

test("ackLingerMs: accepts wait, then go in one request with the first fetch after the oldest waited; a release does not wait", async () => {
  const topic = unique("share-linger");
  const group = unique("g");
  await createTopic(topic, 1);
  const a = consumerFor(group, topic, { ackLingerMs: 400 });
  await assigned(a);
  const acked = results(a);
  await produce(topic, 3);
  const taken: bigint[] = [];
  for (let i = 0; i < 3; i++) {
    const [r] = await drain(a, 1, { maxRecords: 1 });
    taken.push(r!.offset);
    a.acknowledge(r!, "accept");
  }
  assert.deepEqual(await a.fetch({ maxRecords: 1, maxWaitMs: 50 }), []);
  assert.equal(acked.length, 0, "fetches within the linger carry no acks");
  await new Promise((r) => setTimeout(r, 400));
  assert.deepEqual(await a.fetch({ maxRecords: 1, maxWaitMs: 50 }), []);
  assert.deepEqual(
    acked.map((r) => r.offsets),
    [taken],
    "the first fetch after the linger carried all three, in one request",
  );
  assert.equal(acked[0]!.error, undefined);

  await produce(topic, 1);
  const [fourth] = await drain(a, 1);
  a.acknowledge(fourth!, "release");
  const [again] = await drain(a, 1, { timeoutMs: 5_000 });
  assert.equal(again?.offset, fourth!.offset, "the next fetch carried the release at once, and took the record back");
  assert.equal(again?.deliveryCount, 2);
});
