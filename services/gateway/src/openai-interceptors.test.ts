import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { Attr, createLogger, shoalTracer, type CatalogModel } from "@shoal/common";
import { EmbedResponseSchema, type EmbedRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { hashApiKey } from "./api-keys.ts";
import { mapErrors } from "./map-errors.ts";
import { ApiKeys, principalKey, requireApiKey } from "./auth.ts";
import { ModelNotFoundError } from "./errors.ts";
import { createGatewayMetrics, type GatewayMetrics } from "./gateway-metrics.ts";
import { createOpenAiEmbeddings, OPENAI_EMBEDDINGS_METHOD } from "./openai-embeddings.ts";
import { rpcMetrics } from "./rpc-metrics.ts";
import { traceRpc } from "./rpc-tracing.ts";

const MODEL = { id: "m", pool: "p", spec: { dimensions: 3 } } as unknown as CatalogModel;
const KEY = "sk-acme-0123456789abcdef";
const NARROW_KEY = "sk-narrow-0123456789abcdef";
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";

/** Requests counted for the OpenAI endpoint, as `code/model/lane/tenant` → count. */
async function counted(metrics: GatewayMetrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await metrics.requests.get()).values) {
    if (v.labels["method"] !== OPENAI_EMBEDDINGS_METHOD) continue;
    out[`${v.labels["code"]}/${v.labels["model"]}/${v.labels["lane"]}/${v.labels["tenant"]}`] = v.value;
  }
  return out;
}

async function observed(metrics: GatewayMetrics): Promise<number> {
  const v = (await metrics.duration.get()).values.filter((x) => x.labels["method"] === OPENAI_EMBEDDINGS_METHOD && x.metricName?.endsWith("_count"));
  return v.reduce((n, x) => n + x.value, 0);
}

describe("POST /v1/embeddings through the Connect routes' interceptors: SERVER span and request metrics (in-memory exporter, stand-in Embed, real HTTP server)", () => {
  const exporter = new InMemorySpanExporter();
  let metrics: GatewayMetrics;
  let outcome: (req: EmbedRequest, ctx: HandlerContext) => Promise<unknown>;
  /** The span active while Embed ran, per call. */
  let activeInEmbed: Array<Span | undefined> = [];
  const keys = new ApiKeys([
    { tenant: "acme", sha256: hashApiKey(KEY), models: "*", lane: "batch", source: "test" },
    { tenant: "narrow", sha256: hashApiKey(NARROW_KEY), models: ["other"], lane: "interactive", source: "test" },
  ]);
  let withKeys = false;
  let handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  const server = http.createServer((req, res) => handler(req, res));
  let url = "";

  before(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
    trace.disable();
    propagation.disable();
    context.disable();
  });
  beforeEach(() => {
    exporter.reset();
    activeInEmbed = [];
    withKeys = false;
    metrics = createGatewayMetrics(() => 0);
    const logger = createLogger("test", "silent");
    handler = createOpenAiEmbeddings({
      embed: async (req, ctx) => {
        activeInEmbed.push(trace.getActiveSpan());
        ctx.values.get(principalKey)?.authorizeModel(req.model);
        // What the real Embed does: a producer span from the active context.
        shoalTracer().startSpan("send shoal.jobs.p.interactive", { kind: SpanKind.PRODUCER }).end();
        return (await outcome(req, ctx)) as never;
      },
      // The gateway's chain (app.ts), in its order; the key check only while a test turns keys on.
      interceptors: [
        traceRpc("gw-test"),
        rpcMetrics(metrics, (id) => id === "m"),
        mapErrors(logger),
        (next) => (req) => (withKeys ? requireApiKey(keys)(next)(req) : next(req)),
      ],
      models: new Map([["m", MODEL]]),
      maxRequestBytes: 2_048,
      logger,
    });
    outcome = async (req) =>
      create(EmbedResponseSchema, {
        model: req.model,
        embeddings: req.inputs.map((_, i) => ({ index: i, float32Le: new Uint8Array(12), tokens: 1 })),
        usage: { promptTokens: req.inputs.length, totalTokens: req.inputs.length },
      });
  });

  const post = (body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });

  /** The SERVER spans, once `n` have ended (the span ends when the server has sent the response). */
  async function serverSpans(n: number): Promise<ReadableSpan[]> {
    for (let i = 0; i < 200; i++) {
      const spans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
      if (spans.length >= n) return spans;
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.fail(`fewer than ${n} SERVER spans ended`);
  }

  test("one SERVER span per call, child of the caller's traceparent, active while Embed runs; the producer span is its child", async () => {
    const res = await post({ model: "m", input: ["a", "b"] }, { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, "user-agent": "OpenAI/JS 5" });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const [span] = await serverSpans(1);
    assert.ok(span);
    assert.equal(span.name, "POST /v1/embeddings");
    assert.equal(span.spanContext().traceId, TRACE_ID);
    assert.equal(span.parentSpanContext?.spanId, CALLER_SPAN, "the caller's traceparent is the parent");
    assert.deepEqual(
      {
        method: span.attributes[Attr.HTTP_REQUEST_METHOD],
        path: span.attributes[Attr.URL_PATH],
        route: span.attributes[Attr.HTTP_ROUTE],
        scheme: span.attributes[Attr.URL_SCHEME],
        version: span.attributes[Attr.NETWORK_PROTOCOL_VERSION],
        status: span.attributes[Attr.HTTP_RESPONSE_STATUS_CODE],
        model: span.attributes[Attr.MODEL],
        inputs: span.attributes[Attr.INPUTS],
        instance: span.attributes[Attr.GATEWAY_INSTANCE],
        ua: span.attributes[Attr.USER_AGENT],
      },
      {
        method: "POST",
        path: "/v1/embeddings",
        route: "/v1/embeddings",
        scheme: "http",
        version: "1.1",
        status: 200,
        model: "m",
        inputs: 2,
        instance: "gw-test",
        ua: "OpenAI/JS 5",
      },
    );
    assert.equal(span.status.code, SpanStatusCode.UNSET);
    assert.equal(activeInEmbed[0]?.spanContext().spanId, span.spanContext().spanId, "the SERVER span is active while Embed runs");
    const producer = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.PRODUCER);
    assert.equal(producer?.parentSpanContext?.spanId, span.spanContext().spanId, "the job's producer span is its child");
    assert.equal(producer?.spanContext().traceId, TRACE_ID);
    assert.deepEqual(await counted(metrics), { "ok/m/interactive/": 1 });
    assert.equal(await observed(metrics), 1, "latency observed");
  });

  test("without traceparent the span starts a trace", async () => {
    await (await post({ model: "m", input: "a" })).arrayBuffer();
    const [span] = await serverSpans(1);
    assert.equal(span?.parentSpanContext, undefined);
  });

  test("errors: the code Embed threw labels the metrics; 4xx leave the span status unset, 5xx are errors; unknown models are 'unknown'", async () => {
    const cases: Array<[unknown, number, string]> = [
      [new ConnectError("queue full", Code.ResourceExhausted, { "retry-after-ms": "250" }), 429, "ResourceExhausted"],
      [new ConnectError("no worker", Code.Unavailable), 503, "Unavailable"],
      [new ConnectError("bad range", Code.OutOfRange), 400, "OutOfRange"],
      [new Error("boom"), 500, "Internal"],
    ];
    for (const [err, status] of cases) {
      outcome = () => Promise.reject(err);
      const res = await post({ model: "m", input: "a" });
      assert.equal(res.status, status);
      await res.arrayBuffer();
    }
    outcome = (req) => Promise.reject(new ModelNotFoundError(req.model));
    assert.equal((await post({ model: "zzz", input: "a" })).status, 404);
    const spans = await serverSpans(5);
    assert.deepEqual(
      spans.map((s) => [s.attributes[Attr.HTTP_RESPONSE_STATUS_CODE], s.status.code, s.attributes[Attr.ERROR_TYPE]]),
      [
        [429, SpanStatusCode.UNSET, undefined],
        [503, SpanStatusCode.ERROR, "503"],
        [400, SpanStatusCode.UNSET, undefined],
        [500, SpanStatusCode.ERROR, "500"],
        [404, SpanStatusCode.UNSET, undefined],
      ],
    );
    assert.equal(spans[1]?.status.message, "no worker");
    assert.equal(spans[4]?.attributes[Attr.MODEL], "zzz", "the span names the model asked for");
    assert.deepEqual(await counted(metrics), {
      "ResourceExhausted/m/interactive/": 1,
      "Unavailable/m/interactive/": 1,
      "OutOfRange/m/interactive/": 1,
      "Internal/m/interactive/": 1,
      "NotFound/unknown/interactive/": 1,
    });
  });

  test("requests refused before Embed: the code follows the HTTP status (400 InvalidArgument, 413 ResourceExhausted, 415 and 405 InvalidArgument)", async () => {
    assert.equal((await post({ model: "m", input: [[1, 2]] })).status, 400);
    assert.equal((await post({ model: "m", input: "a", dimensions: 2 })).status, 400);
    assert.equal((await post({ model: "m", input: "x".repeat(4_000) })).status, 413);
    assert.equal((await post("a=b", { "content-type": "text/plain" })).status, 415);
    const get = await fetch(url);
    assert.equal(get.status, 405);
    const spans = await serverSpans(5);
    assert.deepEqual(
      spans.map((s) => [s.name, s.attributes[Attr.HTTP_RESPONSE_STATUS_CODE]]),
      [
        ["POST /v1/embeddings", 400],
        ["POST /v1/embeddings", 400],
        ["POST /v1/embeddings", 413],
        ["POST /v1/embeddings", 415],
        ["GET /v1/embeddings", 405],
      ],
    );
    assert.deepEqual(await counted(metrics), { "InvalidArgument///": 4, "ResourceExhausted///": 1 });
    assert.equal(activeInEmbed.length, 0);
  });

  test("API keys: 401 is Unauthenticated; the key's tenant and default lane label the call; a key without the model is PermissionDenied", async () => {
    withKeys = true;
    assert.equal((await post({ model: "m", input: "a" })).status, 401);
    assert.equal((await post({ model: "m", input: "a" }, { authorization: `Bearer ${KEY}` })).status, 200);
    assert.equal((await post({ model: "m", input: "a" }, { authorization: `Bearer ${NARROW_KEY}` })).status, 403);
    assert.equal((await post({ model: "m", input: "b" }, { authorization: `Bearer ${KEY}` })).status, 200);
    assert.equal((await post("{", { authorization: `Bearer ${KEY}` })).status, 400);
    const spans = await serverSpans(5);
    assert.deepEqual(
      spans.map((s) => s.attributes[Attr.TENANT]),
      [undefined, "acme", "narrow", "acme", "acme"],
    );
    assert.deepEqual(await counted(metrics), {
      "Unauthenticated///": 1,
      "ok/m/batch/acme": 2,
      "PermissionDenied/m/interactive/narrow": 1,
      "InvalidArgument///acme": 1,
    });
  });

  test("a caller that leaves mid-call: the call ends when Embed does, as Canceled, and the span is an error", async () => {
    let entered!: () => void;
    const inEmbed = new Promise<void>((r) => (entered = r));
    outcome = (_req, ctx) =>
      new Promise((_, reject) => {
        entered();
        ctx.signal.addEventListener("abort", () => reject(new ConnectError("client went away", Code.Canceled)), { once: true });
      });
    const abort = new AbortController();
    const call = fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", input: "a" }),
      signal: abort.signal,
    });
    await inEmbed;
    abort.abort();
    await assert.rejects(call);
    const [span] = await serverSpans(1);
    assert.equal(span?.status.code, SpanStatusCode.ERROR);
    assert.equal(span?.attributes[Attr.ERROR_TYPE], "Canceled");
    assert.equal(span?.status.message, "client went away", "ended after Embed, with its error");
    assert.equal(span?.attributes[Attr.HTTP_RESPONSE_STATUS_CODE], undefined, "no response was sent");
    assert.deepEqual(await counted(metrics), { "Canceled/m/interactive/": 1 });
  });

  test("with tracing off (no context manager, no provider) the metrics still know the model, lane and tenant", async () => {
    trace.disable();
    context.disable();
    try {
      withKeys = true;
      assert.equal((await post({ model: "m", input: "a" }, { authorization: `Bearer ${KEY}` })).status, 200);
      for (let i = 0; i < 100 && (await observed(metrics)) < 1; i++) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(await counted(metrics), { "ok/m/batch/acme": 1 });
      assert.equal(activeInEmbed[0], undefined);
    } finally {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    }
  });
});
