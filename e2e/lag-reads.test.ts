/**
 * The gateway's lag reads (@shoal/kafka-share's createLagReader, behind the lane-lag monitor and
 * the shoal_gateway_queue_lag_records gauge) against a real broker: they track a real backlog
 * (produce N: lag N; consume: lag 0) through a topic deleted and re-created and a group deleted
 * and re-created, and in steady state one poll of a share pool and a consumer-group pool costs the
 * broker at most 3 requests (DescribeShareGroupOffsets, OffsetFetch, one ListOffsets), counted by
 * the broker's own request log. Before the reader, one share pool's poll cost 5 (Metadata,
 * FindCoordinator, DescribeShareGroupOffsets, ListOffsets ×2).
 *
 * Starts a broker of its own: the request log needs the broker's JVM flags.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { Kafka, logLevel, type Admin, type Producer } from "kafkajs";
import { createLagReader, createShareConsumer, type LagReader, type ShareConsumer } from "@shoal/kafka-share";
import { startRequestLoggedBroker, type RequestLoggedBroker } from "./bench/request-log.ts";

const CLIENT_ID = `lag-reads-${randomUUID().slice(0, 8)}`;
let logged: RequestLoggedBroker;
let brokers: string[];
let kafka: Kafka;
let admin: Admin;
let producer: Producer;
let reader: LagReader;

before(async () => {
  logged = await startRequestLoggedBroker();
  brokers = logged.broker.brokers.split(",");
  kafka = new Kafka({ clientId: "lag-reads-setup", brokers, logLevel: logLevel.NOTHING });
  admin = kafka.admin();
  await admin.connect();
  producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  reader = createLagReader({ brokers, clientId: CLIENT_ID });
});

after(async () => {
  await reader?.close();
  await producer?.disconnect();
  await admin?.disconnect();
  await logged?.stop();
});

const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

async function createTopic(topic: string, partitions: number): Promise<void> {
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
}

/** `count` records spread over `partitions` partitions round robin. */
async function produce(topic: string, count: number, partitions: number, by: Producer = producer): Promise<void> {
  await by.send({ topic, messages: Array.from({ length: count }, (_, i) => ({ value: String(i), partition: i % partitions })) });
}

/** Reads until `read` answers `want` (acks and deletions reach the broker's state asynchronously); fails with the last answer. */
async function until(what: string, read: () => Promise<Map<string, number>>, want: Record<string, number>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "nothing read";
  for (;;) {
    try {
      const got = Object.fromEntries(await read());
      last = JSON.stringify(got);
      if (Object.entries(want).every(([t, n]) => got[t] === n)) return;
    } catch (err) {
      last = String(err);
    }
    if (Date.now() > deadline) assert.fail(`${what}: wanted ${JSON.stringify(want)}, last ${last}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Reads until `read` rejects with `error` (the broker learns of a deletion asynchronously). */
async function rejectsSoon(what: string, read: () => Promise<unknown>, error: RegExp, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      last = JSON.stringify(Object.fromEntries((await read()) as Map<string, number>));
    } catch (err) {
      if (error.test(String(err))) return;
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what}: wanted an error ${error}, last ${last}`);
}

/** A share consumer that takes `want` records of `topics` and accepts them, then leaves. */
async function consumeShare(groupId: string, topics: string[], want: number): Promise<void> {
  const consumer: ShareConsumer = createShareConsumer({ brokers, groupId, clientId: unique("c"), groupConfig: { autoOffsetReset: "earliest" } });
  consumer.subscribe(topics);
  try {
    let got = 0;
    const deadline = Date.now() + 30_000;
    while (got < want) {
      if (Date.now() > deadline) assert.fail(`consumed ${got} of ${want}`);
      for (const r of await consumer.fetch({ maxRecords: 500, maxWaitMs: 500 })) {
        consumer.acknowledge(r, "accept");
        got++;
      }
    }
    // One more fetch carries the last acknowledgements.
    await consumer.fetch({ maxRecords: 1, maxWaitMs: 100 });
  } finally {
    await consumer.close();
  }
}

/** One lag monitor poll of two pools: a share pool on `share.topics`, a consumer-group pool on `group.topics`. */
type Poll = () => Promise<[Map<string, number>, Map<string, number>]>;

/** Requests per poll over `polls` polls: from the reader's counter, and from the broker's log for this client. */
async function requestsPerPoll(poll: Poll, polls: number): Promise<{ client: Record<string, number>; broker: Record<string, number> }> {
  await new Promise((r) => setTimeout(r, 50));
  const before = new Map(reader.requests);
  const from = Date.now();
  for (let i = 0; i < polls; i++) await poll();
  await new Promise((r) => setTimeout(r, 300)); // the log is written as requests complete
  const to = Date.now();
  const client: Record<string, number> = {};
  for (const [api, n] of reader.requests) {
    const d = n - (before.get(api) ?? 0);
    if (d > 0) client[api] = d / polls;
  }
  const broker: Record<string, number> = {};
  for (const e of await logged.requests()) {
    if (e.client !== CLIENT_ID || e.atMs < from - 5 || e.atMs > to) continue;
    broker[e.api] = (broker[e.api] ?? 0) + 1;
  }
  for (const api of Object.keys(broker)) broker[api]! /= polls;
  return { client, broker };
}

const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);

test("lag reads track a real backlog, through topic and group re-creation, at ≤ 3 broker requests per poll of two pools", async () => {
  const [jobs, batch, other] = [unique("jobs"), unique("batch"), unique("other")];
  const shareGroup = unique("share-pool");
  const consumerGroup = unique("group-pool");
  await createTopic(jobs, 2);
  await createTopic(batch, 1);
  await createTopic(other, 2);
  const poll: Poll = () => Promise.all([reader.shareGroupLag(shareGroup, [jobs, batch]), reader.consumerGroupLag(consumerGroup, [other])]);
  const shareLag = () => poll().then(([s]) => s);
  const groupLag = () => poll().then(([, g]) => g);

  // Nothing read yet: every record waits (high − low watermark).
  await produce(jobs, 10, 2);
  await produce(other, 6, 2);
  await until("share group that never read", shareLag, { [jobs]: 10, [batch]: 0 });
  await until("consumer group that never committed", groupLag, { [other]: 6 });

  // Consumed: 0; produced again: N.
  await consumeShare(shareGroup, [jobs, batch], 10);
  await until("share group after accepting all", shareLag, { [jobs]: 0, [batch]: 0 });
  await admin.setOffsets({ groupId: consumerGroup, topic: other, partitions: [0, 1].map((partition) => ({ partition, offset: "3" })) });
  await until("consumer group after committing", groupLag, { [other]: 0 });
  await produce(jobs, 7, 2);
  await produce(batch, 2, 1);
  await produce(other, 4, 2);
  await until("after producing more", shareLag, { [jobs]: 7, [batch]: 2 });
  await until("after producing more", groupLag, { [other]: 4 });

  // Steady state: no Metadata, no FindCoordinator; one request per coordinator and kind, one ListOffsets per leader.
  const steady = await requestsPerPoll(poll, 10);
  console.log(`requests per poll of two pools, steady state: client ${JSON.stringify(steady.client)}, broker ${JSON.stringify(steady.broker)}`);
  assert.deepEqual(steady.client, { DescribeShareGroupOffsets: 1, OffsetFetch: 1, ListOffsets: 1 });
  assert.ok(sum(steady.broker) <= 3, `broker saw ${sum(steady.broker)} requests per poll`);
  assert.ok(sum(steady.broker) >= 2, `the request log counted ${sum(steady.broker)} per poll: is it on?`);
  const shareOnly = await requestsPerPoll(() => Promise.all([reader.shareGroupLag(shareGroup, [jobs, batch]), Promise.resolve(new Map())]), 10);
  console.log(`requests per poll of one share pool: client ${JSON.stringify(shareOnly.client)}, broker ${JSON.stringify(shareOnly.broker)}`);
  assert.ok(sum(shareOnly.broker) <= 2, `broker saw ${sum(shareOnly.broker)} requests per share poll`);

  // The topic deleted and re-created with more partitions: the new topic's backlog, then 0 once consumed.
  await admin.deleteTopics({ topics: [jobs] });
  await rejectsSoon("a deleted topic's lag", shareLag, /UNKNOWN_TOPIC/);
  await createTopic(jobs, 3);
  // A producer that never knew the old topic: the shared one would send to its two partitions only.
  const fresh = kafka.producer();
  await fresh.connect();
  await produce(jobs, 5, 3, fresh).finally(() => fresh.disconnect());
  assert.deepEqual((await admin.fetchTopicOffsets(jobs)).map((p) => p.high).sort(), ["1", "2", "2"]);
  await until("re-created topic", shareLag, { [jobs]: 5, [batch]: 2 });
  await consumeShare(shareGroup, [jobs, batch], 7);
  await until("re-created topic, consumed", shareLag, { [jobs]: 0, [batch]: 0 });

  // The consumer group deleted and re-created: back to every record, then its new commits.
  await admin.deleteGroups([consumerGroup]);
  await until("deleted consumer group", groupLag, { [other]: 10 });
  await admin.setOffsets({ groupId: consumerGroup, topic: other, partitions: [0, 1].map((partition) => ({ partition, offset: "4" })) });
  await until("re-created consumer group", groupLag, { [other]: 2 });

  // After all that, the steady state again.
  const again = await requestsPerPoll(poll, 10);
  console.log(`requests per poll after the changes: client ${JSON.stringify(again.client)}, broker ${JSON.stringify(again.broker)}`);
  assert.ok(sum(again.broker) <= 3, `broker saw ${sum(again.broker)} requests per poll after the changes`);
});

test("lag reads come back after the broker restarts (connections reopened, coordinator asked again)", async () => {
  const topic = unique("restart");
  const group = unique("share-pool");
  await createTopic(topic, 1);
  await produce(topic, 3, 1);
  await until("before the restart", () => reader.shareGroupLag(group, [topic]), { [topic]: 3 });
  await logged.broker.pause();
  await assert.rejects(reader.shareGroupLag(group, [topic]));
  await logged.broker.resume();
  await until("after the restart", () => reader.shareGroupLag(group, [topic]), { [topic]: 3 }, 60_000);
  await producer.send({ topic, messages: [{ value: "after" }] });
  await until("after the restart, one more", () => reader.shareGroupLag(group, [topic]), { [topic]: 4 }, 30_000);
});
