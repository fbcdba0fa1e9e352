import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { Kafka, logLevel } from "kafkajs";
import { jobsTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf } from "./harness/clients.ts";

describe("bad input gets a clear error with the right code; nothing crashes", () => {
  let cluster: TestCluster;
  let model: string;
  before(async () => {
    cluster = await startCluster({
      gateways: 1,
      workers: 1,
      gatewayEnv: { SHOAL_MAX_INPUTS: "16", SHOAL_MAX_INPUT_CHARS: "5000" },
    });
    model = cluster.modelIds[0]!;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("unknown model -> NotFound", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const r = await codeOf(inference.embed({ model: "no-such-model", inputs: ["hi"] }));
    assert.equal(r.code, Code.NotFound);
    assert.match(r.message, /no-such-model/);
  });

  test("per-route body caps: a 100 KiB GetModel is refused ResourceExhausted while Embed takes far larger bodies", async () => {
    const { models, inference } = clientsFor(cluster.urls[0]!, "connect");
    const r = await codeOf(models.getModel({ id: "x".repeat(100 * 1024) }));
    assert.equal(r.code, Code.ResourceExhausted);
    assert.match(r.message, /message size (\d+ )?is larger than configured readMaxBytes 65536/);
    const big = await inference.embed(
      { model, inputs: Array.from({ length: 16 }, () => "word ".repeat(999)), options: { truncate: true } },
      { timeoutMs: 60_000 },
    );
    assert.equal(big.embeddings.length, 16, "an 80 KB Embed is served");
  });

  test("empty input list, empty text, too many inputs, too many characters -> InvalidArgument naming the limit", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const empty = await codeOf(inference.embed({ model, inputs: [] }));
    assert.equal(empty.code, Code.InvalidArgument);
    assert.match(empty.message, /at least one/);
    const blank = await codeOf(inference.embed({ model, inputs: ["ok", "  "] }));
    assert.equal(blank.code, Code.InvalidArgument);
    assert.match(blank.message, /inputs\[1\]: empty text/);
    const many = await codeOf(inference.embed({ model, inputs: Array.from({ length: 17 }, () => "x") }));
    assert.equal(many.code, Code.InvalidArgument);
    assert.match(many.message, /17 texts exceed the limit of 16/);
    const chars = await codeOf(inference.embed({ model, inputs: ["a".repeat(5001)] }));
    assert.equal(chars.code, Code.InvalidArgument);
    assert.match(chars.message, /5001 characters exceed the limit of 5000/);
  });

  test("too many tokens with truncation off -> InvalidArgument naming the token limit; with truncation on -> truncated", async () => {
    const { inference, models } = clientsFor(cluster.urls[0]!, "connect");
    const info = (await models.getModel({ id: model })).model!;
    const long = "tokenization limits matter ".repeat(60);
    const r = await codeOf(inference.embed({ model, inputs: ["short", long] }));
    assert.equal(r.code, Code.InvalidArgument);
    assert.match(r.message, new RegExp(`inputs\\[1\\]: \\d+ tokens exceed the limit of ${info.maxSequenceLength} tokens`));
    const ok = await inference.embed({ model, inputs: ["short", long], options: { truncate: true } });
    assert.equal(ok.embeddings[1]!.truncated, true);
    assert.equal(ok.embeddings[1]!.tokens, info.maxSequenceLength);
    assert.equal(ok.embeddings[0]!.truncated, false);
  });

  test("a deadline shorter than the work -> DeadlineExceeded", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const texts = Array.from({ length: 16 }, (_, i) => `${i} ${"long text to embed ".repeat(60)}`);
    const r = await codeOf(inference.embed({ model, inputs: texts, options: { truncate: true } }, { timeoutMs: 2 }));
    assert.equal(r.code, Code.DeadlineExceeded);
    // The cluster keeps serving afterwards.
    const ok = await inference.embed({ model, inputs: ["still alive"] });
    assert.equal(ok.embeddings.length, 1);
  });

  test("malformed records on the jobs topic are rejected and logged; the partition moves on", async () => {
    const kafka = new Kafka({ clientId: "e2e-garbage", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const topic = jobsTopic(cluster.pool, Lane.INTERACTIVE);
    const admin = kafka.admin();
    await admin.connect();
    const partitions = (await admin.fetchTopicOffsets(topic)).length;
    await admin.disconnect();
    // Garbage on every partition, including an empty record and bytes that parse as a wrong message.
    const garbage = [Buffer.from([0xff, 0xff, 0xff]), Buffer.alloc(0), Buffer.from("not a protobuf at all"), Buffer.from([0x0a, 0x00])];
    await producer.send({
      topic,
      messages: Array.from({ length: partitions }, (_, p) => garbage.map((value) => ({ partition: p, value }))).flat(),
    });
    await producer.disconnect();
    const worker = cluster.workers[0]!;
    await worker.waitForLog((l) => l.msg === "rejected undecodable job record", 20_000);
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => inference.embed({ model, inputs: [`after garbage ${i}`] })));
    assert.equal(results.length, 12);
    // Every garbage record is rejected (the partitions' records are read in parallel, not in order).
    const rejected = (): number => worker.logs.filter((l) => l.msg === "rejected undecodable job record").length;
    const expected = partitions * garbage.length;
    for (let waited = 0; rejected() < expected && waited < 20_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
    assert.equal(rejected(), expected);
  });
});
