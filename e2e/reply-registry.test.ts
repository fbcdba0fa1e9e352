import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { encodeEnvelope, encodeGatewayRegistration, GATEWAYS_TOPIC, jobsTopic, replyTopic } from "@shoal/common";
import { GatewayRegistrationSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { type Admin, Kafka, logLevel, type Producer } from "kafkajs";
import { kafkaBrokers, startCluster, type TestCluster, workerMetricsUrl } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";
import { until } from "./harness/wait.ts";

/**
 * The reply-topic registry (issue #19; on by default): a worker produces a result
 * only to a reply topic that a live gateway registered on shoal.gateways. A job record naming any
 * other topic — one that exists, so the missing-topic check would not catch it — is computed,
 * acknowledged and answered nowhere, counted in shoal_worker_results_dropped_total. Each refusal
 * is paired with a job the same worker answers, so the test fails if the registry refuses
 * everything (or nothing). No cluster keys here: with keys, the registrations are signed too
 * (e2e/cluster-keys.test.ts). A lapse counts only once the worker can prove it (a record written
 * after it, or the topic's end offset read): e2e/multi-host.test.ts cuts workers off from the
 * brokers while their gateways keep refreshing, and no result may be dropped there.
 */
describe("reply-topic registry: workers answer only reply topics a live gateway registered", () => {
  let cluster: TestCluster;
  let producer: Producer;
  let admin: Admin;
  let workerMetrics: string;

  before(async () => {
    // Few in-flight slots: a waiting result holds its job's slot, so a flood of forged jobs could hold them all.
    cluster = await startCluster({ workerEnv: { SHOAL_MAX_INFLIGHT_JOBS: "32" } });
    workerMetrics = await workerMetricsUrl(cluster.workers[0]!);
    const kafka = new Kafka({ clientId: "e2e-registry", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
    producer = kafka.producer();
    await producer.connect();
    admin = kafka.admin();
    await admin.connect();
  });
  after(async () => {
    await producer?.disconnect();
    await admin?.disconnect();
    await cluster?.stop();
  });

  const job = (replyTo: string) =>
    Buffer.from(
      encodeEnvelope(
        create(JobEnvelopeSchema, {
          jobId: randomUUID(),
          model: cluster.modelIds[0]!,
          deadlineUnixMs: BigInt(Date.now() + 30_000),
          enqueuedUnixMs: BigInt(Date.now()),
          replyTo: { topic: replyTo, partition: 0 },
          attempt: 1,
          lane: Lane.INTERACTIVE,
          task: { case: "embed", value: { inputs: ["who answers this?"], normalize: true, truncate: true } },
        }),
      ),
    );
  const dropped = async (): Promise<number> => total(await scrape(workerMetrics), "shoal_worker_results_dropped_total", { reason: "unregistered_reply_topic" });
  const answered = async (): Promise<number> => total(await scrape(workerMetrics), "shoal_worker_jobs_total");
  /** Records on a one-partition topic. */
  const records = async (topic: string): Promise<number> => Number((await admin.fetchTopicOffsets(topic))[0]!.high);
  const newReplyTopic = async (): Promise<string> => {
    const topic = replyTopic(`rogue-${randomBytes(4).toString("hex")}`);
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
    return topic;
  };
  const register = (instanceId: string, intervalMs: number) =>
    producer.send({
      topic: GATEWAYS_TOPIC,
      messages: [
        {
          key: instanceId,
          value: Buffer.from(
            encodeGatewayRegistration(
              create(GatewayRegistrationSchema, { instanceId, replyTopic: replyTopic(instanceId), updatedUnixMs: BigInt(Date.now()), intervalMs }),
            ),
          ),
        },
      ],
    });

  test("the gateway registered its reply topic: Embed is answered", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const res = await inference.embed({ model: cluster.modelIds[0]!, inputs: ["registered"] }, { timeoutMs: 20_000 });
    assert.equal(res.embeddings.length, 1);
  });

  test("a job naming an existing reply topic no gateway registered is computed and answered nowhere; one naming the gateway's is answered", async () => {
    const rogue = await newReplyTopic();
    const droppedBefore = await dropped();
    const answeredBefore = await answered();
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.INTERACTIVE), messages: [{ value: job(rogue) }] });
    await until("the worker drops the result", async () => (await dropped()) >= droppedBefore + 1, 15_000);
    // The control: the gateway's own reply topic (nobody waits for this job id: the gateway drops it).
    const gatewayDropped = async () => total(await scrape(`${cluster.urls[0]}/metrics`), "shoal_gateway_results_dropped_total");
    const gatewayBefore = await gatewayDropped();
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.INTERACTIVE), messages: [{ value: job(replyTopic(`${cluster.pool}-g0`)) }] });
    await until("the registered topic gets its result", async () => (await gatewayDropped()) >= gatewayBefore + 1, 15_000);
    assert.equal(await records(rogue), 0, "nothing was produced to the unregistered topic");
    assert.equal(await dropped(), droppedBefore + 1);
    assert.equal((await answered()) - answeredBefore, 2, "both jobs were computed and acknowledged");
  });

  test("a registration that is not refreshed lapses: answered while live, refused three intervals (+2 s) later", async () => {
    const instance = `lapsing-${randomBytes(4).toString("hex")}`;
    const topic = replyTopic(instance);
    await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true });
    // Without cluster keys anyone who may produce to shoal.gateways can register (Kafka ACLs keep
    // that topic to gateways); the registration still lapses unless refreshed.
    await register(instance, 300);
    const droppedBefore = await dropped();
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.INTERACTIVE), messages: [{ value: job(topic) }] });
    await until("the live registration's topic gets the result", async () => (await records(topic)) === 1, 15_000);
    await new Promise((r) => setTimeout(r, 3 * 300 + 2_000 + 200));
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.INTERACTIVE), messages: [{ value: job(topic) }] });
    await until("the lapsed registration's result is dropped", async () => (await dropped()) >= droppedBefore + 1, 15_000);
    assert.equal(await records(topic), 1, "no second result on the lapsed topic");
  });

  test("a flood of 300 jobs naming unregistered reply topics: all dropped, and a caller's Embed beside it is answered within 3 s", async () => {
    const droppedBefore = await dropped();
    const rogue = await newReplyTopic();
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.INTERACTIVE), messages: Array.from({ length: 300 }, () => ({ value: job(rogue) })) });
    // Only 16 results may wait out the 1 s grace at once: the rest are refused at once, freeing their slots.
    const t0 = performance.now();
    const res = await inference.embed({ model: cluster.modelIds[0]!, inputs: ["beside the flood"] }, { timeoutMs: 20_000 });
    const ms = performance.now() - t0;
    assert.equal(res.embeddings.length, 1);
    await until("all 300 results dropped", async () => (await dropped()) >= droppedBefore + 300, 30_000);
    console.error(`reply-registry: Embed beside 300 forged jobs answered in ${ms.toFixed(0)} ms`);
    assert.ok(ms < 3_000, `answered after ${ms.toFixed(0)} ms`);
    assert.equal(await records(rogue), 0);
  });
});
