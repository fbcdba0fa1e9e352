import assert from "node:assert/strict";
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Kafka, logLevel, type KafkaMessage } from "kafkajs";
import { deadLetterTopic, jobsTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ensureModel } from "@shoal/models";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * A real poison input, no fault injection: a model directory whose manifest declares 512 tokens
 * over a graph with 128 position embeddings (a misdeclared export). Any input past 128 tokens
 * makes ONNX Runtime's position Gather fail, every time; shorter inputs run fine.
 */
async function misdeclaredModel(): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "shoal-poison-")), "misdeclared");
  await cp(await ensureModel("tiny"), dir, { recursive: true });
  const manifestPath = join(dir, "shoal-model.json");
  const manifest = JSON.parse(await readFile(manifestPath, "utf8")) as Record<string, unknown>;
  await writeFile(manifestPath, JSON.stringify({ ...manifest, id: "shoal-misdeclared", maxSequenceLength: 512 }, null, 2));
  return dir;
}

/** Reads every record of a topic from the start (bounded wait). */
async function readAll(topic: string, atLeast: number, timeoutMs = 20_000): Promise<KafkaMessage[]> {
  const kafka = new Kafka({ clientId: "e2e-dlq-reader", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `e2e-dlq-${Math.random().toString(36).slice(2)}` });
  const seen: KafkaMessage[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise<void>((resolve) => {
    void consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message);
        if (seen.length >= atLeast) resolve();
      },
    });
  });
  await Promise.race([done, new Promise((r) => setTimeout(r, timeoutMs))]);
  await consumer.disconnect();
  return seen;
}

describe("poison jobs: bounded retries through the retry topic, then the dead-letter topic", () => {
  let cluster: TestCluster;
  let workerUrl: string;
  before(async () => {
    cluster = await startCluster({ presets: [], modelDirs: [await misdeclaredModel()], workerEnv: { SHOAL_MAX_ATTEMPTS: "3" } });
    const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    workerUrl = `http://127.0.0.1:${String(line["httpPort"])}/metrics`;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("a poison job fails alone, goes to the dead-letter topic with its reason, and its caller is told; other jobs are unaffected", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const model = "shoal-misdeclared";
    const poison = inference.embed({ model, inputs: ["poison ".repeat(200)] }, { timeoutMs: 30_000 }).then(
      () => "ok" as const,
      (err: unknown) => ConnectError.from(err),
    );
    // Innocent jobs around it, some likely batched with it on its first attempt.
    const innocent = await Promise.all(
      Array.from({ length: 24 }, (_, i) => inference.embed({ model, inputs: [`innocent request number ${i}`] }, { timeoutMs: 30_000 })),
    );
    const outcome = await poison;
    assert.equal(innocent.length, 24, "every innocent job answered");
    assert.ok(innocent.every((r) => r.embeddings.length === 1 && r.embeddings[0]!.values.length === 64));
    assert.ok(outcome instanceof ConnectError, "the poison job is not answered OK");
    assert.equal(
      outcome.code,
      Code.Internal,
      `the poison job's caller is told it failed (${outcome.rawMessage}); worker log:\n${cluster.workers[0]!.tail(80)}`,
    );
    assert.match(outcome.rawMessage, /failed 3 time\(s\) and was moved to the dead-letter topic shoal\.dead\./);
    assert.match(outcome.rawMessage, /indices element out of data bounds/);

    const dead = await readAll(deadLetterTopic(cluster.pool), 1);
    const jobLetters = dead.filter((m) => m.headers?.["shoal-attempts"]?.toString() === "3");
    assert.equal(jobLetters.length, 1, "one dead letter for the poison job");
    const headers = jobLetters[0]!.headers!;
    assert.match(String(headers["shoal-dead-reason"]), /Gather/);
    assert.equal(String(headers["shoal-model"]), model);
    assert.match(String(headers["shoal-source"]), /^shoal\.retry\./, "its last attempt came from the retry topic");

    const m = await scrape(workerUrl);
    assert.ok(total(m, "shoal_worker_job_retries_total") >= 2, "two retries of the poison job (plus any neighbours of its first batch)");
    assert.equal(total(m, "shoal_worker_dead_letters_total", { reason: "failed" }), 1);
    // The partitions moved on: later jobs are served.
    const later = await Promise.all(Array.from({ length: 8 }, (_, i) => inference.embed({ model, inputs: [`after the poison ${i}`] })));
    assert.equal(later.length, 8);
  });

  test("records that are not jobs go to the dead-letter topic with the decode error", async () => {
    const kafka = new Kafka({ clientId: "e2e-garbage", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic: jobsTopic(cluster.pool, Lane.BATCH), messages: [{ value: Buffer.from("definitely not a job envelope") }] });
    await producer.disconnect();
    const dead = await readAll(deadLetterTopic(cluster.pool), 2);
    const undecodable = dead.filter((m) => m.headers?.["shoal-attempts"]?.toString() === "0");
    assert.equal(undecodable.length, 1);
    assert.match(String(undecodable[0]!.headers!["shoal-dead-reason"]), /undecodable JobEnvelope/);
    assert.equal(undecodable[0]!.value?.toString(), "definitely not a job envelope", "the record is kept as it came");
  });
});
