/**
 * fetch({ topics }): a member subscribed to several topics pulls from the ones it names (a share
 * session lists the partitions each ShareFetch reads). And a fact about the broker this rests on:
 * the share assignor spreads a group's partitions over its members once there are at least as
 * many partitions as members, so topics meant to be shared by every worker (one per model, say)
 * each need a share group of their own. Real broker.
 */
import assert from "node:assert/strict";
import { after, afterEach, test } from "node:test";
import type { AcknowledgeResult, ShareRecord } from "@shoal/kafka-share";
import { assigned, closeAll, consumerFor, createTopic, disconnectProducer, drain, produce, unique } from "./helpers.ts";

afterEach(closeAll);
after(disconnectProducer);

const topicsOf = (rs: readonly ShareRecord[]): string[] => [...new Set(rs.map((r) => r.topic))].sort();

test("fetch({ topics }) takes only from the named topics; acks of a topic left out of the session still land", async () => {
  const [a, b] = [unique("model-a"), unique("model-b")];
  await Promise.all([createTopic(a), createTopic(b)]);
  const c = consumerFor(unique("g"), [a, b]);
  await assigned(c);
  await produce(a, 5);
  await produce(b, 5);
  // A plain fetch reads every subscribed topic (in the broker's order, and the member may be
  // assigned one topic a heartbeat before the other), so wait for all ten.
  const plain = await drain(c, 10, { timeoutMs: 10_000 });
  assert.deepEqual(topicsOf(plain), [a, b].sort(), "a plain fetch reads every topic");
  assert.equal(plain.length, 10);
  for (const r of plain) c.acknowledge(r, "release");
  await c.flush();
  const onlyA = await drain(c, 5, { topics: [a], timeoutMs: 5_000 });
  assert.deepEqual(topicsOf(onlyA), [a]);
  assert.equal(onlyA.length, 5);
  const onlyB = await drain(c, 5, { topics: [b], timeoutMs: 5_000 });
  assert.deepEqual(topicsOf(onlyB), [b]);
  assert.equal(onlyB.length, 5);
  // A's records are accepted while A is out of the member's share session (the last fetch named B only).
  const results: AcknowledgeResult[] = [];
  c.on("acknowledged", (r) => results.push(r));
  for (const r of onlyA) c.acknowledge(r, "accept");
  await c.flush();
  assert.equal(results.filter((r) => r.topic === a && !r.error).flatMap((r) => r.offsets).length, 5);
  assert.deepEqual(await c.fetch({ topics: [a], maxRecords: 10, maxWaitMs: 500 }), [], "accepted records are done");
  // B's records, released, come back (to anyone) with their delivery counted.
  for (const r of onlyB) c.acknowledge(r, "release");
  await c.flush();
  const again = await drain(c, 5, { topics: [b], timeoutMs: 5_000 });
  assert.equal(again.length, 5);
  assert.ok(
    again.every((r) => r.deliveryCount >= 2),
    String(again.map((r) => r.deliveryCount)),
  );
});

test("fetch({ topics }) refuses a topic the member did not subscribe to", async () => {
  const a = unique("model-a");
  await createTopic(a);
  const c = consumerFor(unique("g"), a);
  await assert.rejects(c.fetch({ topics: ["not-subscribed"], maxRecords: 1, maxWaitMs: 10 }), /not subscribed/);
});

test("broker fact: the share assignor spreads nine one-partition topics over four members (no member reads them all)", async () => {
  const topics = Array.from({ length: 9 }, (_, i) => unique(`model-${i}`));
  const group = unique("g");
  await Promise.all(topics.map((t) => createTopic(t)));
  const members = Array.from({ length: 4 }, () => consumerFor(group, topics));
  await Promise.all(members.map((m) => assigned(m)));
  // Let the group settle: assignments come with heartbeats (1 s here).
  await new Promise((r) => setTimeout(r, 3_000));
  const counts = members.map((m) => m.metrics().assignment.length);
  console.error(`partitions per member: ${counts.join(", ")}`);
  assert.equal(
    counts.reduce((n, c) => n + c, 0),
    9,
    "each partition has one member",
  );
  assert.ok(
    counts.every((c) => c < 9),
    `some member was assigned every topic: ${counts.join(", ")}`,
  );
  // With one topic of one partition, every member reads it (the shared queue Shoal's pools use).
  const shared = unique("shared");
  await createTopic(shared);
  const group2 = unique("g");
  const sharers = Array.from({ length: 4 }, () => consumerFor(group2, shared));
  await Promise.all(sharers.map((m) => assigned(m)));
  assert.deepEqual(
    sharers.map((m) => m.metrics().assignment.length),
    [1, 1, 1, 1],
  );
});
