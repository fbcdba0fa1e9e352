import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  createRecordSigner,
  encodeEnvelope,
  encodeGatewayRegistration,
  encodeResult,
  encodeStatus,
  GATEWAYS_TOPIC,
  jobsTopic,
  replyTopic,
  SIGNATURE_HEADER,
  STATUS_TOPIC,
  statusSignedBytes,
} from "@shoal/common";
import { GatewayRegistrationSchema, WorkerStatusSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema, JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { Kafka, logLevel, type Producer } from "kafkajs";
import { kafkaBrokers, startCluster, type TestCluster, workerMetricsUrl } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * The Kafka trust boundary (issue #19): with SHOAL_CLUSTER_KEYS on every service, a client that
 * can produce to Shoal's topics can neither have a forged job run nor answer a call with a forged
 * result, nor register a reply topic. Each forgery is paired with the same record correctly signed, which does get through,
 * so the test fails if verification rejects everything (or nothing).
 */
describe("cluster keys: job, result, cancel and worker status records are signed and checked", () => {
  const key = randomBytes(32).toString("hex");
  const rightly = createRecordSigner([Buffer.from(key, "hex")]);
  const wrongly = createRecordSigner([randomBytes(32)]);
  let cluster: TestCluster;
  let producer: Producer;
  let workerMetrics: string;

  before(async () => {
    // The reply-topic registry on: the gateway's registration must be signed for Embed to be answered.
    cluster = await startCluster({ gatewayEnv: { SHOAL_CLUSTER_KEYS: key }, workerEnv: { SHOAL_CLUSTER_KEYS: key } });
    workerMetrics = await workerMetricsUrl(cluster.workers[0]!);
    producer = new Kafka({ clientId: "e2e-forger", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING }).producer();
    await producer.connect();
  });
  after(async () => {
    await producer?.disconnect();
    await cluster?.stop();
  });

  const gatewayReplies = () => replyTopic(`${cluster.pool}-g0`);
  const until = async (what: string, check: () => Promise<boolean>): Promise<void> => {
    for (let i = 0; i < 100; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`not within 10 s: ${what}`);
  };

  test("signed end to end (jobs, results, the gateway's reply-topic registration): Embed is answered", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const res = await inference.embed({ model: cluster.modelIds[0]!, inputs: ["signed all the way"] }, { timeoutMs: 20_000 });
    assert.equal(res.embeddings.length, 1);
  });

  test("a forged job (unsigned, or signed with another key) is never run; the same job signed with the cluster key is", async () => {
    const job = (id: string) =>
      Buffer.from(
        encodeEnvelope(
          create(JobEnvelopeSchema, {
            jobId: id,
            model: cluster.modelIds[0]!,
            deadlineUnixMs: BigInt(Date.now() + 30_000),
            enqueuedUnixMs: BigInt(Date.now()),
            replyTo: { topic: gatewayReplies(), partition: 0 },
            attempt: 1,
            lane: Lane.INTERACTIVE,
            tenant: "someone-else",
            task: { case: "embed", value: { inputs: ["forged"], normalize: true, truncate: true } },
          }),
        ),
      );
    const rejectedBefore = total(await scrape(workerMetrics), "shoal_worker_records_rejected_total");
    const jobsBefore = total(await scrape(workerMetrics), "shoal_worker_jobs_total");
    const unsigned = job(randomUUID());
    const otherKey = job(randomUUID());
    await producer.send({
      topic: jobsTopic(cluster.pool, Lane.INTERACTIVE),
      messages: [{ value: unsigned }, { value: otherKey, headers: { [SIGNATURE_HEADER]: wrongly.sign("job", otherKey)! } }],
    });
    await until(
      "the worker rejects both forgeries",
      async () => total(await scrape(workerMetrics), "shoal_worker_records_rejected_total") >= rejectedBefore + 2,
    );
    const signed = job(randomUUID());
    await producer.send({
      topic: jobsTopic(cluster.pool, Lane.INTERACTIVE),
      messages: [{ value: signed, headers: { [SIGNATURE_HEADER]: rightly.sign("job", signed)! } }],
    });
    await until("the rightly signed job runs", async () => total(await scrape(workerMetrics), "shoal_worker_jobs_total") >= jobsBefore + 1);
    const m = await scrape(workerMetrics);
    assert.equal(total(m, "shoal_worker_records_rejected_total"), rejectedBefore + 2);
    assert.equal(total(m, "shoal_worker_jobs_total"), jobsBefore + 1, "only the signed job was answered");
  });

  test("a forged result never reaches a call; a rightly signed one passes verification", async () => {
    const gatewayMetrics = `${cluster.urls[0]}/metrics`;
    const result = (id: string) => Buffer.from(encodeResult(create(JobResultSchema, { jobId: id, status: JobStatus.OK, workerId: "forger", attempt: 1 })));
    const forged = result(randomUUID());
    const wrong = result(randomUUID());
    const right = result(randomUUID());
    const droppedBefore = total(await scrape(gatewayMetrics), "shoal_gateway_results_dropped_total");
    await producer.send({
      topic: gatewayReplies(),
      messages: [
        { value: forged },
        { value: wrong, headers: { [SIGNATURE_HEADER]: wrongly.sign("result", wrong)! } },
        // A job's signature on a result's bytes: the kind is part of the MAC.
        { value: right, headers: { [SIGNATURE_HEADER]: rightly.sign("job", right)! } },
      ],
    });
    await until(
      "the gateway refuses the three forgeries",
      async () => total(await scrape(gatewayMetrics), "shoal_gateway_records_rejected_total", { reason: "signature" }) >= 3,
    );
    await producer.send({ topic: gatewayReplies(), messages: [{ value: right, headers: { [SIGNATURE_HEADER]: rightly.sign("result", right)! } }] });
    // Nobody waits for that job id: it passes the signature check and is dropped as unknown.
    await until(
      "the signed result passes the check",
      async () => total(await scrape(gatewayMetrics), "shoal_gateway_results_dropped_total") >= droppedBefore + 1,
    );
    assert.equal(total(await scrape(gatewayMetrics), "shoal_gateway_records_rejected_total", { reason: "signature" }), 3);
  });

  test("a forged worker status (unsigned, another key, a signature moved to another worker id) and a forged tombstone never change the cluster view; a rightly signed status does", async () => {
    const gatewayMetrics = `${cluster.urls[0]}/metrics`;
    const { cluster: clusterApi } = clientsFor(cluster.urls[0]!, "connect");
    const listed = async (): Promise<string[]> => (await clusterApi.getCluster({})).workers.map((w) => w.workerId);
    const realWorker = (await listed())[0];
    assert.ok(realWorker !== undefined, "the cluster's own (signed) worker is listed");
    const status = (id: string) =>
      Buffer.from(encodeStatus(create(WorkerStatusSchema, { workerId: id, updatedUnixMs: BigInt(Date.now()), intervalMs: 60_000, pool: cluster.pool })));
    const sig = (signer: typeof rightly, key: string, value: Buffer | null) => ({ [SIGNATURE_HEADER]: signer.sign("status", statusSignedBytes(key, value))! });
    const unsigned = status("forged-unsigned");
    const otherKey = status("forged-other-key");
    const moved = status("forged-moved");
    const rejectedBefore = total(await scrape(gatewayMetrics), "shoal_gateway_status_records_rejected_total", { reason: "signature" });
    await producer.send({
      topic: STATUS_TOPIC,
      messages: [
        { key: "forged-unsigned", value: unsigned },
        { key: "forged-other-key", value: otherKey, headers: sig(wrongly, "forged-other-key", otherKey) },
        // The cluster key's signature, but over another worker id.
        { key: "forged-moved", value: moved, headers: sig(rightly, "someone-else", moved) },
        // A tombstone for the live worker, unsigned: it must not take the worker out of the view.
        { key: realWorker, value: null },
      ],
    });
    await until(
      "the gateway refuses the four forged status records",
      async () => total(await scrape(gatewayMetrics), "shoal_gateway_status_records_rejected_total", { reason: "signature" }) >= rejectedBefore + 4,
    );
    const signed = status("signed-visitor");
    await producer.send({ topic: STATUS_TOPIC, messages: [{ key: "signed-visitor", value: signed, headers: sig(rightly, "signed-visitor", signed) }] });
    await until("the rightly signed status is listed", async () => (await listed()).includes("signed-visitor"));
    assert.deepEqual(await listed(), [realWorker, "signed-visitor"].sort(), "no forged worker listed, the real one still is");
    assert.equal(total(await scrape(gatewayMetrics), "shoal_gateway_status_records_rejected_total", { reason: "signature" }), rejectedBefore + 4);
    // A signed tombstone takes the visitor out (and keeps the test's leftovers out of the view).
    await producer.send({ topic: STATUS_TOPIC, messages: [{ key: "signed-visitor", value: null, headers: sig(rightly, "signed-visitor", null) }] });
    await until("the signed tombstone removes it", async () => !(await listed()).includes("signed-visitor"));
    // Leave nothing behind on the broker's shared status topic: a gateway without cluster keys in a
    // later test reads it from the beginning and would list the forged workers until they expire.
    await producer.send({
      topic: STATUS_TOPIC,
      messages: ["forged-unsigned", "forged-other-key", "forged-moved"].map((key) => ({ key, value: null, headers: sig(rightly, key, null) })),
    });
  });

  test("a forged reply-topic registration (unsigned, another key, a worker status signature) is refused by the worker", async () => {
    const instance = `forged-${randomBytes(4).toString("hex")}`;
    const value = Buffer.from(
      encodeGatewayRegistration(
        create(GatewayRegistrationSchema, { instanceId: instance, replyTopic: replyTopic(instance), updatedUnixMs: BigInt(Date.now()), intervalMs: 60_000 }),
      ),
    );
    const rejected = async () => total(await scrape(workerMetrics), "shoal_worker_gateway_registrations_rejected_total", { reason: "signature" });
    const before = await rejected();
    await producer.send({
      topic: GATEWAYS_TOPIC,
      messages: [
        { key: instance, value },
        { key: instance, value, headers: { [SIGNATURE_HEADER]: wrongly.sign("gateway", statusSignedBytes(instance, value))! } },
        { key: instance, value, headers: { [SIGNATURE_HEADER]: rightly.sign("status", statusSignedBytes(instance, value))! } },
      ],
    });
    await until("the worker refuses the three forged registrations", async () => (await rejected()) >= before + 3);
    assert.equal(await rejected(), before + 3);
  });
});
