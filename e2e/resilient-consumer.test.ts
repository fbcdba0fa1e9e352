import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Kafka, logLevel, type Admin, type Producer } from "kafkajs";
import { createLogger, createResilientConsumer } from "@shoal/common";
import { kafkaBrokers } from "./harness/cluster.ts";
import { until } from "./harness/wait.ts";

const logger = createLogger("e2e-resilient-consumer", "silent");

describe("createResilientConsumer on a real broker", () => {
  const kafka = new Kafka({ clientId: "e2e-resilient", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  let admin: Admin;
  let producer: Producer;
  before(async () => {
    admin = kafka.admin();
    await admin.connect();
    producer = kafka.producer();
    await producer.connect();
  });
  after(async () => {
    await producer?.disconnect();
    await admin?.disconnect();
  });

  async function freshTopic(): Promise<string> {
    const topic = `e2e-resilient-${randomBytes(4).toString("hex")}`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    return topic;
  }
  const send = (topic: string, value: string): Promise<unknown> => producer.send({ topic, messages: [{ value }] });

  test("a consumer kafkajs crashed for good (CRASH, restart=false) is replaced and consumes again", async () => {
    const topic = await freshTopic();
    const groupId = `e2e-resilient-${randomBytes(4).toString("hex")}`;
    const seen: string[] = [];
    let thrown = 0;
    const rc = createResilientConsumer(kafka, logger, {
      component: "test-consumer",
      // No retry and no restart: the handler's error ends this consumer for good, as a long broker
      // outage does in production.
      consumerConfig: {
        groupId,
        sessionTimeout: 6_000,
        heartbeatInterval: 500,
        maxWaitTimeInMs: 100,
        retry: { retries: 0, restartOnFailure: async () => false },
      },
      subscribe: (c) => c.subscribe({ topic, fromBeginning: true }),
      run: {
        eachMessage: async ({ message }) => {
          const value = message.value?.toString() ?? "";
          if (value === "poison" && thrown === 0) {
            thrown += 1;
            throw new Error("poison: the handler fails once");
          }
          seen.push(value);
        },
      },
      startWhen: "joined",
      joinTimeoutMs: 30_000,
      replaceAfterMs: 200,
    });
    const crashes: boolean[] = [];
    const first = (): void => {
      const c = rc.consumer!;
      c.on(c.events.CRASH, (e) => crashes.push(e.payload.restart));
    };
    try {
      await rc.start();
      first();
      assert.equal(rc.joined, true);
      assert.equal(rc.running, true);
      await send(topic, "a");
      await until("the first record", () => seen.includes("a"));
      const original = rc.consumer;

      await send(topic, "poison");
      await until("a replacement consumer", () => rc.replacements === 1);
      assert.deepEqual(crashes, [false], "kafkajs gave up on the first consumer");
      assert.notEqual(rc.consumer, original, "a new kafkajs consumer");
      // The failed record was not committed: the replacement reads it again, then new ones.
      await until("the failed record, read by the replacement", () => seen.includes("poison"));
      await send(topic, "b");
      await until("a record produced after the replacement", () => seen.includes("b"));
      await until("joined again", () => rc.joined);
      assert.equal(thrown, 1);
    } finally {
      await rc.stop();
    }
    assert.equal(rc.running, false);
    assert.equal(rc.joined, false);
  });

  test("stop() leaves the group, deletes it when asked, and nothing replaces a stopped consumer", async () => {
    const topic = await freshTopic();
    const groupId = `e2e-resilient-${randomBytes(4).toString("hex")}`;
    const seen: string[] = [];
    const rc = createResilientConsumer(kafka, logger, {
      component: "test-consumer",
      consumerConfig: { groupId, sessionTimeout: 6_000, heartbeatInterval: 500, maxWaitTimeInMs: 100 },
      subscribe: (c) => c.subscribe({ topic, fromBeginning: true }),
      run: { eachMessage: async ({ message }) => void seen.push(message.value?.toString() ?? "") },
      startWhen: "joined",
      deleteGroupOnStop: true,
    });
    await rc.start();
    await send(topic, "x");
    await until("the record", () => seen.length === 1);
    assert.ok((await admin.listGroups()).groups.some((g) => g.groupId === groupId));
    await Promise.all([rc.stop(), rc.stop()]);
    assert.ok(!(await admin.listGroups()).groups.some((g) => g.groupId === groupId), "the group is gone");
    await send(topic, "y");
    await new Promise((r) => setTimeout(r, 1_000));
    assert.deepEqual(seen, ["x"]);
    assert.equal(rc.replacements, 0);
  });
});
