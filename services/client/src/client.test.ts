import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { InputType, Task, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InferenceService, VectorEncoding, type ClassifyRequest, type EmbedRequest, type RerankRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { createShoalClient, type Protocol, type RetryInfo } from "./index.ts";

const DIMS = 4;

/** The fake server's vector for a text: recognisable, so order and content can be checked. */
function expectedVector(text: string): number[] {
  const n = Number(/(\d+)$/.exec(text)?.[1] ?? -1);
  return [n, text.length, 0.5, -n / 8];
}

/** The fake reranker's score of a document: longer is better (so the order is easy to predict). */
function fakeScore(document: string): number {
  return Math.fround(document.length / 100);
}

const FAKE_LABELS = ["negative", "positive"];

/** The fake classifier's scores: "positive" wins for texts containing "good". */
function fakeLabelScores(text: string): number[] {
  return text.includes("good") ? [0.25, 0.75] : [0.875, 0.125];
}

/**
 * A test double of the *server* side only: a real Connect handler on real HTTP/1.1 and h2c
 * servers, whose InferenceService fails according to `failWith` before answering with
 * `expectedVector`. Everything on the client side is the real code under test.
 */
class FakeServer {
  calls: EmbedRequest[] = [];
  /** First input of each call, in the order the fake answered. */
  completed: string[] = [];
  headers: Headers[] = [];
  /** Decides, per call number (from 1), whether to fail and how. */
  failWith: (call: number, req: EmbedRequest) => ConnectError | undefined = () => undefined;
  /** Per-call latency, to make concurrent batches finish out of order. */
  delayMs: (req: EmbedRequest) => number = () => 0;
  rerankCalls: RerankRequest[] = [];
  classifyCalls: ClassifyRequest[] = [];
  /** Decides, per Rerank or Classify call number (from 1, each counted on its own), whether to fail. */
  failScoring: (call: number) => ConnectError | undefined = () => undefined;
  h1Url = "";
  h2Url = "";
  private readonly h1: http.Server;
  private readonly h2: http2.Http2Server;
  private readonly sessions = new Set<http2.ServerHttp2Session>();

  constructor() {
    const inference: ServiceImpl<typeof InferenceService> = {
      embed: async (req, ctx) => {
        this.calls.push(req);
        this.headers.push(ctx.requestHeader);
        const failure = this.failWith(this.calls.length, req);
        if (failure) throw failure;
        await new Promise((r) => setTimeout(r, this.delayMs(req)));
        this.completed.push(req.inputs[0] ?? "");
        const packed = req.options?.encoding === VectorEncoding.FLOAT32_LE;
        return {
          model: req.model,
          embeddings: req.inputs.map((text, index) => {
            const v = new Float32Array(expectedVector(text));
            return packed ? { index, float32Le: new Uint8Array(v.buffer), tokens: text.length } : { index, values: Array.from(v), tokens: text.length };
          }),
          usage: { promptTokens: req.inputs.length * 3, totalTokens: req.inputs.length * 3 },
        };
      },
      rerank: (req, ctx) => {
        this.rerankCalls.push(req);
        this.headers.push(ctx.requestHeader);
        const failure = this.failScoring(this.rerankCalls.length);
        if (failure) throw failure;
        const ranked = req.documents
          .map((document, index) => ({ index, score: fakeScore(document), document: req.returnDocuments ? document : "", tokens: document.length + 2 }))
          .sort((a, b) => b.score - a.score);
        const tokens = ranked.reduce((sum, r) => sum + r.tokens, 0);
        return {
          model: req.model,
          results: req.topK ? ranked.slice(0, req.topK) : ranked,
          usage: { promptTokens: tokens, totalTokens: tokens },
          timing: { queueMs: 1, tokenizeMs: 2, inferenceMs: 3, totalMs: 7 },
        };
      },
      tokenize: () => {
        throw new ConnectError("Tokenize is not used by the client", Code.Unimplemented);
      },
      classify: (req, ctx) => {
        this.classifyCalls.push(req);
        this.headers.push(ctx.requestHeader);
        const failure = this.failScoring(this.classifyCalls.length);
        if (failure) throw failure;
        return {
          model: req.model,
          classifications: req.inputs.map((text, index) => {
            const labels = fakeLabelScores(text)
              .map((score, i) => ({ label: FAKE_LABELS[i]!, score }))
              .sort((a, b) => b.score - a.score);
            return { index, labels: req.topK ? labels.slice(0, req.topK) : labels, tokens: text.length, truncated: req.truncate && text.length > 10 };
          }),
          usage: { promptTokens: req.inputs.length, totalTokens: req.inputs.length },
        };
      },
    };
    const models: ServiceImpl<typeof ModelService> = {
      listModels: () => ({ models: [{ id: "fake-embedder", task: Task.EMBED, dimensions: DIMS, maxSequenceLength: 128 }] }),
      getModel: () => {
        throw new ConnectError("not in the fake", Code.Unimplemented);
      },
    };
    const handler = connectNodeAdapter({
      routes(router) {
        router.service(InferenceService, inference);
        router.service(ModelService, models);
      },
    });
    this.h1 = http.createServer(handler);
    this.h2 = http2.createServer(handler);
    this.h2.on("session", (session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
    });
  }

  async start(): Promise<void> {
    const listen = (s: http.Server | http2.Http2Server): Promise<string> =>
      new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));
    [this.h1Url, this.h2Url] = await Promise.all([listen(this.h1), listen(this.h2)]);
  }

  reset(): void {
    this.calls = [];
    this.completed = [];
    this.headers = [];
    this.failWith = () => undefined;
    this.delayMs = () => 0;
    this.rerankCalls = [];
    this.classifyCalls = [];
    this.failScoring = () => undefined;
  }

  async stop(): Promise<void> {
    this.h1.closeAllConnections();
    for (const session of this.sessions) session.destroy();
    await Promise.all([new Promise((r) => this.h1.close(r)), new Promise((r) => this.h2.close(r))]);
  }

  url(protocol: Protocol): string {
    return protocol === "grpc" ? this.h2Url : this.h1Url;
  }
}

const unavailable = (retryAfter?: Record<string, string>): ConnectError => new ConnectError("worker pool busy", Code.Unavailable, retryAfter);

describe("Shoal client against a fake-server double (real Connect server on port 0)", () => {
  const server = new FakeServer();
  before(() => server.start());
  after(() => server.stop());
  beforeEach(() => server.reset());

  for (const protocol of ["connect", "grpc", "grpc-web"] satisfies Protocol[]) {
    test(`${protocol}: fake fails twice with Unavailable, the client retries and gets Float32Array vectors`, async () => {
      server.failWith = (n) => (n <= 2 ? unavailable() : undefined);
      const retries: RetryInfo[] = [];
      const client = createShoalClient({
        baseUrl: server.url(protocol),
        protocol,
        apiKey: "k-123",
        retry: { initialBackoffMs: 10 },
        onRetry: (i) => retries.push(i),
      });
      const res = await client.embed("fake-embedder", ["a-1", "bb-2"]);
      assert.equal(server.calls.length, 3, "two failures + one success");
      assert.deepEqual(
        retries.map((r) => [r.attempt, r.error.code]),
        [
          [1, Code.Unavailable],
          [2, Code.Unavailable],
        ],
      );
      assert.ok(retries.every((r) => r.retryAfterMs === undefined && r.delayMs >= 0 && r.delayMs <= 10 * 2));
      assert.equal(server.calls[2]!.options?.encoding, VectorEncoding.FLOAT32_LE, "asks for packed vectors");
      assert.ok(res.vectors[0] instanceof Float32Array);
      assert.deepEqual(Array.from(res.vectors[0]!), expectedVector("a-1"));
      assert.deepEqual(Array.from(res.vectors[1]!), expectedVector("bb-2"));
      assert.equal(res.dimensions, DIMS);
      assert.deepEqual(res.usage, { promptTokens: 6, totalTokens: 6 });
      assert.equal(server.headers[0]!.get("authorization"), "Bearer k-123");
      const models = await client.listModels();
      assert.deepEqual(
        models.map((m) => [m.id, m.dimensions]),
        [["fake-embedder", DIMS]],
      );
    });
  }

  test("embed options (input type, dimensions, truncation) reach Embed as sent; unset ones stay unset", async () => {
    const client = createShoalClient({ baseUrl: server.url("connect"), protocol: "connect" });
    await client.embed("fake-embedder", ["q-1"], { inputType: InputType.SEARCH_QUERY, dimensions: 2, truncation: Truncation.START });
    await client.embed("fake-embedder", ["q-2"]);
    const [set, unset] = server.calls.map((c) => c.options!);
    assert.deepEqual([set!.inputType, set!.dimensions, set!.truncation], [InputType.SEARCH_QUERY, 2, Truncation.START]);
    assert.deepEqual([unset!.inputType, unset!.dimensions, unset!.truncation], [InputType.UNSPECIFIED, undefined, Truncation.UNSPECIFIED]);
  });

  for (const protocol of ["connect", "grpc"] satisfies Protocol[]) {
    test(`${protocol}: retry-after-ms from the fake (header for Connect, trailer for gRPC) sets the wait`, async () => {
      server.failWith = (n) => (n <= 2 ? unavailable({ "retry-after-ms": "150" }) : undefined);
      const retries: RetryInfo[] = [];
      const client = createShoalClient({ baseUrl: server.url(protocol), protocol, onRetry: (i) => retries.push(i) });
      const started = performance.now();
      await client.embed("fake-embedder", ["x-1"]);
      const elapsed = performance.now() - started;
      assert.equal(server.calls.length, 3);
      assert.deepEqual(
        retries.map((r) => r.retryAfterMs),
        [150, 150],
      );
      assert.ok(
        retries.every((r) => r.delayMs >= 150 && r.delayMs <= 165),
        `delays ${retries.map((r) => r.delayMs)}`,
      );
      assert.ok(elapsed >= 300, `waited at least 2 x 150 ms, took ${elapsed.toFixed(0)} ms`);
    });
  }

  test("standard retry-after (seconds) on ResourceExhausted is honoured too", async () => {
    server.failWith = (n) => (n === 1 ? new ConnectError("queue full", Code.ResourceExhausted, { "retry-after": "1" }) : undefined);
    const retries: RetryInfo[] = [];
    const client = createShoalClient({ baseUrl: server.h1Url, onRetry: (i) => retries.push(i) });
    const started = performance.now();
    await client.embed("fake-embedder", ["x-1"]);
    assert.equal(server.calls.length, 2);
    assert.equal(retries[0]?.retryAfterMs, 1_000);
    assert.ok(performance.now() - started >= 1_000);
  });

  test("attempts are bounded: a fake that never recovers is called maxAttempts times, then the error surfaces", async () => {
    server.failWith = () => unavailable();
    const client = createShoalClient({ baseUrl: server.h1Url, retry: { maxAttempts: 3, initialBackoffMs: 5 } });
    await assert.rejects(client.embed("fake-embedder", ["x-1"]), (err: ConnectError) => err.code === Code.Unavailable);
    assert.equal(server.calls.length, 3);
  });

  test("InvalidArgument and NotFound are not retried", async () => {
    server.failWith = () => new ConnectError("inputs[0]: empty text", Code.InvalidArgument);
    const client = createShoalClient({ baseUrl: server.h1Url });
    await assert.rejects(client.embed("fake-embedder", [" "]), (err: ConnectError) => err.code === Code.InvalidArgument);
    assert.equal(server.calls.length, 1);
  });

  test("the deadline bounds retries: a retry-after beyond it fails at once instead of waiting", async () => {
    server.failWith = () => unavailable({ "retry-after-ms": "5000" });
    const client = createShoalClient({ baseUrl: server.h1Url, defaultTimeoutMs: 800 });
    const started = performance.now();
    await assert.rejects(client.embed("fake-embedder", ["x-1"]), (err: ConnectError) => err.code === Code.Unavailable);
    assert.equal(server.calls.length, 1);
    assert.ok(performance.now() - started < 500);
  });

  test("each attempt carries the time left as its deadline; a slow fake gets DeadlineExceeded", async () => {
    server.delayMs = () => 2_000;
    const client = createShoalClient({ baseUrl: server.h2Url, protocol: "grpc" });
    const started = performance.now();
    await assert.rejects(client.embed("fake-embedder", ["x-1"], { timeoutMs: 300 }), (err: ConnectError) => err.code === Code.DeadlineExceeded);
    assert.ok(performance.now() - started < 1_500);
  });

  for (const protocol of ["connect", "grpc", "grpc-web"] satisfies Protocol[]) {
    test(`${protocol}: rerank retries Unavailable like embed and returns the ranked documents`, async () => {
      server.failScoring = (n) => (n <= 2 ? unavailable() : undefined);
      const retries: RetryInfo[] = [];
      const client = createShoalClient({
        baseUrl: server.url(protocol),
        protocol,
        apiKey: "k-9",
        retry: { initialBackoffMs: 10 },
        onRetry: (i) => retries.push(i),
      });
      const docs = ["short", "the longest document", "medium one"];
      const res = await client.rerank("fake-reranker", "which is longest?", docs, { topK: 2, returnDocuments: true, truncate: true });
      assert.equal(server.rerankCalls.length, 3, "two failures + one success");
      assert.deepEqual(
        retries.map((r) => [r.attempt, r.error.code]),
        [
          [1, Code.Unavailable],
          [2, Code.Unavailable],
        ],
      );
      const sent = server.rerankCalls[2]!;
      assert.deepEqual(
        [sent.model, sent.query, sent.documents, sent.topK, sent.truncate, sent.returnDocuments],
        ["fake-reranker", "which is longest?", docs, 2, true, true],
      );
      assert.deepEqual(
        res.results.map((r) => [r.index, r.score, r.document, r.tokens, r.truncated]),
        [
          [1, fakeScore(docs[1]!), docs[1], docs[1]!.length + 2, false],
          [2, fakeScore(docs[2]!), docs[2], docs[2]!.length + 2, false],
        ],
      );
      assert.equal(res.model, "fake-reranker");
      assert.deepEqual(res.usage, { promptTokens: 41, totalTokens: 41 });
      assert.deepEqual(res.timing, { queueMs: 1, tokenizeMs: 2, inferenceMs: 3, totalMs: 7 });
      assert.equal(server.headers[0]!.get("authorization"), "Bearer k-9");
    });
  }

  test("rerank without returnDocuments: no document text; defaults sent (all results, no truncation)", async () => {
    const client = createShoalClient({ baseUrl: server.h1Url });
    const res = await client.rerank("fake-reranker", "q", ["a", "bbb", "cc"]);
    assert.deepEqual(
      res.results.map((r) => [r.index, r.document]),
      [
        [1, undefined],
        [2, undefined],
        [0, undefined],
      ],
    );
    const sent = server.rerankCalls[0]!;
    assert.deepEqual([sent.topK, sent.truncate, sent.returnDocuments], [undefined, false, false]);
  });

  for (const protocol of ["connect", "grpc"] satisfies Protocol[]) {
    test(`${protocol}: classify honours retry-after-ms and returns labels per text`, async () => {
      server.failScoring = (n) => (n === 1 ? new ConnectError("lane full", Code.ResourceExhausted, { "retry-after-ms": "120" }) : undefined);
      const retries: RetryInfo[] = [];
      const client = createShoalClient({ baseUrl: server.url(protocol), protocol, onRetry: (i) => retries.push(i) });
      const started = performance.now();
      const res = await client.classify("fake-classifier", ["a good day", "rain again"], { topK: 1, truncate: true });
      assert.ok(performance.now() - started >= 120);
      assert.equal(server.classifyCalls.length, 2);
      assert.deepEqual(
        retries.map((r) => r.retryAfterMs),
        [120],
      );
      assert.deepEqual(
        res.classifications.map((c) => [c.index, c.labels, c.tokens, c.truncated]),
        [
          [0, [{ label: "positive", score: 0.75 }], 10, false],
          [1, [{ label: "negative", score: 0.875 }], 10, false],
        ],
      );
      assert.deepEqual(res.usage, { promptTokens: 2, totalTokens: 2 });
      assert.equal(res.timing, undefined);
      assert.deepEqual([server.classifyCalls[1]!.topK, server.classifyCalls[1]!.truncate], [1, true]);
    });
  }

  test("rerank and classify: InvalidArgument is not retried; a fake that never recovers is tried maxAttempts times", async () => {
    const client = createShoalClient({ baseUrl: server.h1Url, retry: { maxAttempts: 3, initialBackoffMs: 5 } });
    server.failScoring = () => new ConnectError("model 'x' is an embedding model, not a rerank model; call Embed", Code.InvalidArgument);
    await assert.rejects(client.rerank("x", "q", ["d"]), (err: ConnectError) => err.code === Code.InvalidArgument);
    assert.equal(server.rerankCalls.length, 1);
    server.failScoring = () => unavailable();
    await assert.rejects(client.classify("fake-classifier", ["t"]), (err: ConnectError) => err.code === Code.Unavailable);
    assert.equal(server.classifyCalls.length, 3);
  });

  test("rerank and classify: the deadline bounds retries and each attempt", async () => {
    server.failScoring = () => unavailable({ "retry-after-ms": "5000" });
    const client = createShoalClient({ baseUrl: server.h2Url, protocol: "grpc", defaultTimeoutMs: 800 });
    const started = performance.now();
    await assert.rejects(client.rerank("fake-reranker", "q", ["d"]), (err: ConnectError) => err.code === Code.Unavailable);
    await assert.rejects(client.classify("fake-classifier", ["t"], { timeoutMs: 300 }), (err: ConnectError) => err.code === Code.Unavailable);
    assert.equal(server.rerankCalls.length + server.classifyCalls.length, 2, "no attempt waits past the deadline");
    assert.ok(performance.now() - started < 1_000);
    const aborted = new AbortController();
    aborted.abort();
    server.failScoring = () => undefined;
    await assert.rejects(client.classify("fake-classifier", ["t"], { signal: aborted.signal }), (err: ConnectError) => err.code === Code.Canceled);
  });

  test("embedCorpus: 1,000 texts in batches of 37, 5 in flight, out-of-order completion and transient failures; order kept, progress reported", async () => {
    const texts = Array.from({ length: 1_000 }, (_, i) => `passage number ${i}`);
    // Later batches answer faster, so completion order differs from submission order.
    server.delayMs = (req) => 40 - (Number(/(\d+)$/.exec(req.inputs[0]!)?.[1]) % 400) / 10;
    server.failWith = (n) => (n % 7 === 3 ? unavailable({ "retry-after-ms": "5" }) : undefined);
    const progress: { done: number; batchesDone: number }[] = [];
    const client = createShoalClient({ baseUrl: server.h2Url, protocol: "grpc" });
    const res = await client.embedCorpus("fake-embedder", texts, {
      batchSize: 37,
      concurrency: 5,
      onProgress: (p) => {
        assert.equal(p.total, 1_000);
        assert.equal(p.batches, 28);
        progress.push({ done: p.done, batchesDone: p.batchesDone });
      },
    });
    assert.equal(res.vectors.length, 1_000);
    for (const [i, v] of res.vectors.entries()) assert.deepEqual(Array.from(v), expectedVector(texts[i]!), `vector ${i}`);
    const ok = server.calls.filter((_, i) => (i + 1) % 7 !== 3);
    assert.equal(ok.length, 28, "one successful call per batch");
    assert.ok(server.calls.length > 28, "some batches were retried");
    assert.ok(server.calls.every((c) => c.inputs.length <= 37));
    assert.equal(progress.length, 28);
    assert.deepEqual(
      progress.map((p) => p.batchesDone),
      Array.from({ length: 28 }, (_, i) => i + 1),
    );
    assert.ok(progress.every((p, i) => i === 0 || p.done > progress[i - 1]!.done));
    assert.equal(progress.at(-1)!.done, 1_000);
    assert.deepEqual(res.usage, { promptTokens: 3_000, totalTokens: 3_000 });
    const finished = server.completed.map((t) => Number(/(\d+)$/.exec(t)![1]));
    assert.ok(
      finished.some((v, i) => i > 0 && v < finished[i - 1]!),
      "batches finished out of order",
    );
  });

  test("embedCorpus: a batch that keeps failing rejects the run and stops the remaining batches", async () => {
    server.failWith = (_n, req) => (req.inputs[0] === "t-20" ? new ConnectError("bad text", Code.InvalidArgument) : undefined);
    server.delayMs = () => 20;
    const client = createShoalClient({ baseUrl: server.h1Url });
    const texts = Array.from({ length: 200 }, (_, i) => `t-${i}`);
    await assert.rejects(
      client.embedCorpus("fake-embedder", texts, { batchSize: 10, concurrency: 2 }),
      (err: ConnectError) => err.code === Code.InvalidArgument,
    );
    assert.ok(server.calls.length < 20, `stopped early after ${server.calls.length} calls`);
  });
});
