import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startScratchJaeger, type ScratchJaeger } from "../infra/dev/jaeger.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { newTraceparent, parentOf, serviceOf, waitForTrace, type JaegerSpan, type JaegerTrace } from "./harness/jaeger-api.ts";

function one(t: JaegerTrace, pred: (s: JaegerSpan) => boolean, what: string): JaegerSpan {
  const found = t.spans.filter(pred);
  assert.equal(found.length, 1, `exactly one ${what} span (have: ${t.spans.map((s) => s.operationName).join(", ")})`);
  return found[0]!;
}

const complete = (t: JaegerTrace): boolean =>
  ["shoal.inference", "shoal.batch", "process shoal.replies."].every((name) => t.spans.some((s) => s.operationName.startsWith(name))) &&
  t.spans.some((s) => s.operationName.startsWith("send shoal.replies."));

describe("one trace per request across gateway, Kafka and worker (real Jaeger)", () => {
  let jaeger: ScratchJaeger;
  let cluster: TestCluster;
  before(async () => {
    jaeger = await startScratchJaeger();
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttp, OTEL_BSP_SCHEDULE_DELAY: "100" };
    cluster = await startCluster({
      gatewayEnv: otel,
      // A wait window so concurrent requests share a batch.
      workerEnv: { ...otel, SHOAL_BATCH_MAX_WAIT_MS: "150" },
    });
  });
  after(async () => {
    await cluster?.stop();
    await jaeger?.stop();
  });

  test("one Embed = one trace: server span, publish, job, batch, inference, reply, receipt", async () => {
    const model = cluster.modelIds[0]!;
    const tp = newTraceparent();
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    await inference.embed({ model, inputs: ["trace me"] }, { headers: { traceparent: tp.header } });
    const t = await waitForTrace(jaeger.queryUrl, tp.traceId, complete);

    const server = one(t, (s) => s.operationName === "shoal.v1.InferenceService/Embed", "gateway server");
    const publish = one(t, (s) => s.operationName.startsWith("send shoal.jobs."), "job publish");
    const job = one(t, (s) => s.operationName.startsWith("process shoal.jobs."), "worker job");
    const batch = one(t, (s) => s.operationName === "shoal.batch", "batch");
    const infer = one(t, (s) => s.operationName === "shoal.inference", "inference");
    const queue = one(t, (s) => s.operationName === "shoal.queue_wait", "queue wait");
    const tokenize = one(t, (s) => s.operationName === "shoal.tokenize", "tokenize");
    const replySend = one(t, (s) => s.operationName.startsWith("send shoal.replies."), "reply publish");
    const receipt = one(t, (s) => s.operationName.startsWith("process shoal.replies."), "gateway receipt");

    assert.equal(parentOf(server), tp.spanId, "the client's traceparent owns the root");
    assert.equal(parentOf(publish), server.spanID);
    assert.equal(parentOf(job), publish.spanID, "worker job span is a child of the gateway's publish (crosses services via Kafka headers)");
    for (const s of [batch, infer, queue, tokenize, replySend]) assert.equal(parentOf(s), job.spanID, `${s.operationName} under the job`);
    assert.equal(parentOf(receipt), replySend.spanID, "gateway receipt is a child of the worker's reply publish");
    assert.ok(
      infer.references.some((r) => r.refType === "FOLLOWS_FROM" && r.spanID === batch.spanID),
      "inference links the batch",
    );

    assert.equal(serviceOf(t, server), "shoal-gateway");
    assert.equal(serviceOf(t, receipt), "shoal-gateway");
    assert.equal(serviceOf(t, job), "shoal-worker");
    const tags = Object.fromEntries(batch.tags.map((x) => [x.key, x.value]));
    assert.equal(tags["shoal.batch.items"], 1);
    assert.ok(Number(tags["shoal.batch.tokens"]) > 2);
    const serverTags = Object.fromEntries(server.tags.map((x) => [x.key, x.value]));
    assert.equal(serverTags["rpc.system"], "connect_rpc");
    assert.equal(serverTags["rpc.method"], "Embed");
  });

  test("POST /v1/embeddings = one trace too: an HTTP SERVER span under the caller's traceparent, the job below it", async () => {
    const model = cluster.modelIds[0]!;
    const tp = newTraceparent();
    const res = await fetch(`${cluster.urls[0]}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: tp.header },
      body: JSON.stringify({ model, input: ["trace the OpenAI door"] }),
    });
    assert.equal(res.status, 200);
    await res.json();
    const t = await waitForTrace(jaeger.queryUrl, tp.traceId, complete);

    const server = one(t, (s) => s.operationName === "POST /v1/embeddings", "gateway HTTP server");
    const publish = one(t, (s) => s.operationName.startsWith("send shoal.jobs."), "job publish");
    const job = one(t, (s) => s.operationName.startsWith("process shoal.jobs."), "worker job");
    assert.equal(parentOf(server), tp.spanId, "the client's traceparent owns the root");
    assert.equal(parentOf(publish), server.spanID, "the job is published under the HTTP span");
    assert.equal(parentOf(job), publish.spanID);
    assert.equal(serviceOf(t, server), "shoal-gateway");
    assert.ok(!t.spans.some((s) => s.operationName.startsWith("shoal.v1.InferenceService/")), "no RPC span: the endpoint calls Embed directly");
    const tags = Object.fromEntries(server.tags.map((x) => [x.key, x.value]));
    assert.equal(tags["span.kind"], "server");
    assert.equal(tags["http.request.method"], "POST");
    assert.equal(tags["url.path"], "/v1/embeddings");
    assert.equal(tags["http.route"], "/v1/embeddings");
    assert.equal(tags["http.response.status_code"], 200);
    assert.equal(tags["shoal.model"], model);
    assert.equal(tags["shoal.inputs"], 1);
  });

  test("8 concurrent requests batched together: every trace links the same batch span", async () => {
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const parents = Array.from({ length: 8 }, () => newTraceparent());
    await Promise.all(parents.map((tp, i) => inference.embed({ model, inputs: [`concurrent ${i}`] }, { headers: { traceparent: tp.header } })));
    const traces = await Promise.all(
      parents.map((tp) => waitForTrace(jaeger.queryUrl, tp.traceId, (t) => t.spans.some((s) => s.operationName === "shoal.inference"))),
    );
    const batchIds = traces.map((t) => {
      const infer = one(t, (s) => s.operationName === "shoal.inference", "inference");
      const link = infer.references.find((r) => r.refType === "FOLLOWS_FROM");
      assert.ok(link, "inference span links its batch");
      return link.spanID;
    });
    assert.equal(new Set(batchIds).size, 1, `all 8 link one batch span (got ${new Set(batchIds).size})`);
    const holder = traces.find((t) => t.spans.some((s) => s.spanID === batchIds[0] && s.operationName === "shoal.batch"));
    assert.ok(holder, "the batch span lives in one member's trace");
    const batch = holder.spans.find((s) => s.spanID === batchIds[0])!;
    // Parent (first job) + links (the other seven): the batch reaches every member.
    const jobSpanOf = (t: JaegerTrace): string => one(t, (s) => s.operationName.startsWith("process shoal.jobs."), "job").spanID;
    assert.deepEqual(new Set(batch.references.map((r) => r.spanID)), new Set(traces.map(jobSpanOf)));
  });
});
