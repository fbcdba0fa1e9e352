import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Kafka, logLevel, type Admin, type Producer } from "kafkajs";
import { createLogger, encodeResult } from "@shoal/common";
import { JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { createReplyConsumer, REPLY_COMMIT_INTERVAL_MS } from "../services/gateway/src/reply-consumer.ts";
import { kafkaBrokers } from "./harness/cluster.ts";
import { until } from "./harness/wait.ts";

const logger = createLogger("e2e-reply-consumer", "silent");

describe("the gateway's reply consumer on a real broker", () => {
  const kafka = new Kafka({ clientId: "e2e-reply-consumer", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
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

  test("hands over every result at once, and commits its offset by interval rather than once per fetch", async () => {
    const topic = `e2e-replies-${randomBytes(4).toString("hex")}`;
    const groupId = `${topic}-group`;
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const seen: string[] = [];
    const replies = createReplyConsumer(kafka, logger, {
      topic,
      groupId,
      onResult: (r) => {
        seen.push(r.jobId);
        return "delivered";
      },
    });
    const committed = async (): Promise<number> => {
      const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return Number(t?.partitions[0]?.offset ?? -1);
    };
    const send = (jobId: string) =>
      producer.send({ topic, messages: [{ key: jobId, value: Buffer.from(encodeResult(create(JobResultSchema, { jobId, status: JobStatus.OK }))) }] });
    const startedAt = Date.now();
    await replies.start();
    try {
      // One at a time, each its own fetch: kafkajs' autoCommit would commit after each.
      for (let i = 0; i < 10; i++) {
        await send(`job-${i}`);
        await until(`result ${i} handed over`, () => seen.length === i + 1, 5_000);
      }
      assert.ok(
        Date.now() - startedAt < REPLY_COMMIT_INTERVAL_MS,
        "the ten results took longer than the commit interval; the check below needs them within it",
      );
      assert.equal(await committed(), -1, "no commit within the first interval");
      // Past the interval, the next fetch commits everything handed over so far.
      await new Promise((r) => setTimeout(r, Math.max(0, startedAt + REPLY_COMMIT_INTERVAL_MS + 200 - Date.now())));
      await send("job-10");
      await until("the offset committed after the interval", async () => (await committed()) === 11, 10_000);
      assert.deepEqual(
        seen,
        Array.from({ length: 11 }, (_, i) => `job-${i}`),
      );
    } finally {
      await replies.stop();
      await admin.deleteGroups([groupId]).catch(() => undefined);
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    }
  });
});
