import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { cancelTopic, decodeCancel, decodeEnvelope, type Catalog, type CatalogModel } from "@shoal/common";
import type { Message } from "kafkajs";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import {
  ClassifyRequestSchema,
  ClassifyResponseSchema,
  EmbedRequestSchema,
  EmbedResponseSchema,
  InferenceService,
  RerankRequestSchema,
  RerankResponseSchema,
  VectorEncoding,
} from "@shoal/gen/shoal/v1/inference_pb.ts";
import { JobResultSchema, JobStatus, type JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { Admission } from "./admission.ts";
import { QueueUnavailableError, toConnectError } from "./errors.ts";
import { EmbedCache } from "./embed-cache/embed-cache.ts";
import { type AbandonedJob, createInferenceService, type InferenceDeps } from "./inference-service.ts";
import type { JobProducer } from "./job-producer.ts";
import { PendingJobs } from "./pending-jobs.ts";

const fake = (id: string, spec: Record<string, unknown>): CatalogModel =>
  ({ id, pool: "p", spec: { maxSequenceLength: 128, ...spec }, batching: {} }) as unknown as CatalogModel;

const catalog = {
  path: "/dev/null",
  pools: new Map([["p", { name: "p", partitions: 1 }]]),
  models: new Map<string, CatalogModel>([
    ["emb", fake("emb", { task: "embed", dimensions: 2, normalize: true, modelPath: "/models/emb/model.onnx" })],
    ["rr", fake("rr", { task: "rerank", dimensions: 1, scoreActivation: "sigmoid" })],
    ["cls", fake("cls", { task: "classify", dimensions: 3, labels: ["neg", "neu", "pos"], problemType: "single_label" })],
  ]),
} as unknown as Catalog;

type Output = MessageInitShape<typeof JobResultSchema>["output"];
const f32 = (values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);

/**
 * The service over a stand-in queue: the producer decodes each envelope it is given and answers
 * it at once through PendingJobs, as the reply consumer would, with what `worker` returns.
 */
function harness(extra: Partial<InferenceDeps> = {}) {
  const pending = new PendingJobs();
  const sent: { topic: string; envelope: JobEnvelope }[] = [];
  const admitted: number[] = [];
  let worker: (env: JobEnvelope) => Output = () => ({ case: undefined });
  /** Records waiting behind a request in flight (set `holding`): neither sent nor answered. */
  const held: Message[] = [];
  const cancels: string[] = [];
  const abandoned: AbandonedJob[] = [];
  const state = { holding: false };
  /** Errors the next sends of jobs fail with, in order (a broker that did not answer). */
  const failures: Error[] = [];
  const producer: JobProducer = {
    ackTimeoutMs: 10,
    start: async () => undefined,
    stop: async () => undefined,
    withdraw(message) {
      const i = held.indexOf(message);
      if (i >= 0) held.splice(i, 1);
      return i >= 0;
    },
    async send(topic, message) {
      if (topic === cancelTopic("p")) {
        cancels.push(decodeCancel(message.value as Buffer).jobId);
        return;
      }
      const failure = failures.shift();
      if (failure !== undefined) {
        sent.push({ topic, envelope: decodeEnvelope(message.value as Buffer) });
        throw failure;
      }
      if (state.holding) {
        held.push(message);
        return new Promise<void>(() => undefined);
      }
      const envelope = decodeEnvelope(message.value as Buffer);
      sent.push({ topic, envelope });
      queueMicrotask(() =>
        pending.settle(
          create(JobResultSchema, {
            jobId: envelope.jobId,
            status: JobStatus.OK,
            workerId: "w-1",
            timings: { queueMs: 1, tokenizeMs: 2, inferenceMs: 3, deliveries: 2 },
            output: worker(envelope),
          }),
        ),
      );
    },
  };
  const limits = { maxInFlightTokens: 1e6, maxQueuedTokens: 1e6 };
  const service = createInferenceService({
    catalog,
    producer,
    pending,
    replyTopic: "shoal.replies.gw-test",
    limits: { maxInputsPerRequest: 8, maxInputChars: 100 },
    defaultTimeoutMs: 5_000,
    maxTimeoutMs: 10_000,
    isAccepting: () => true,
    isQueueReachable: () => true,
    admission: new Admission({ interactive: limits, batch: limits }),
    onAdmitted: (_lane, tokens) => admitted.push(tokens),
    onRejected: () => undefined,
    onAbandoned: (how) => abandoned.push(how),
    ...extra,
  });
  return {
    service,
    sent,
    held,
    cancels,
    abandoned,
    failures,
    pending,
    state,
    admitted,
    answer: (fn: (env: JobEnvelope) => Output) => (worker = fn),
  };
}

function ctxFor(method: (typeof InferenceService.method)[keyof typeof InferenceService.method], signal = new AbortController().signal): HandlerContext {
  return createHandlerContext({
    service: InferenceService,
    method,
    protocolName: "test",
    requestMethod: "POST",
    url: "/test",
    requestSignal: signal,
    requestHeader: new Headers(),
    contextValues: createContextValues(),
  });
}

/** Asserts a handler's answer (a promise: the handlers are async) fails with `code` and `message`. */
async function rejects(answer: unknown, code: Code, message: RegExp): Promise<void> {
  await assert.rejects(Promise.resolve(answer), (err: unknown) => {
    const mapped = toConnectError(err);
    assert.equal(Code[mapped.code], Code[code]);
    assert.match(mapped.rawMessage, message);
    return true;
  });
}

describe("InferenceService handlers over a stand-in queue (real PendingJobs and Admission)", () => {
  let h: ReturnType<typeof harness>;
  beforeEach(() => (h = harness()));

  test("Embed: envelope, vectors, usage and timing headers as before", async () => {
    h.answer((env) => {
      assert.equal(env.task.case, "embed");
      return { case: "embed", value: { dimensions: 2, vectors: f32([1, 2, 3, 4]), tokenCounts: [3, 5], truncated: [1] } };
    });
    const ctx = ctxFor(InferenceService.method.embed);
    const res = create(
      EmbedResponseSchema,
      await h.service.embed(
        create(EmbedRequestSchema, { model: "emb", inputs: ["hello", "world!"], lane: Lane.BATCH, options: { encoding: VectorEncoding.FLOAT32_LE } }),
        ctx,
      ),
    );
    const env = h.sent[0]!.envelope;
    assert.equal(h.sent[0]!.topic.includes("batch"), true);
    assert.deepEqual(env.task, { case: "embed", value: env.task.value });
    assert.ok(env.task.case === "embed" && env.task.value.normalize === true && env.task.value.truncate === false);
    assert.equal(env.model, "emb");
    assert.equal(env.replyTo?.topic, "shoal.replies.gw-test");
    assert.deepEqual(
      res.embeddings.map((e) => [e.index, Array.from(new Float32Array(new Uint8Array(e.float32Le).buffer)), e.tokens, e.truncated]),
      [
        [0, [1, 2], 3, false],
        [1, [3, 4], 5, true],
      ],
    );
    assert.deepEqual(res.usage, { $typeName: "shoal.v1.Usage", promptTokens: 8, totalTokens: 8 });
    assert.equal(ctx.responseHeader.get("shoal-worker"), "w-1");
    assert.equal(ctx.responseHeader.get("shoal-inference-ms"), "3.00");
    assert.equal(res.timing?.queueMs, 1);
    // A job handed out twice (given back once) says so, in the Timing and a header.
    assert.equal(res.timing?.deliveries, 2);
    assert.equal(ctx.responseHeader.get("shoal-deliveries"), "2");
  });

  test("Rerank: pairs go to the worker; results sorted, top_k applied, documents copied, usage summed", async () => {
    h.answer((env) => {
      assert.ok(env.task.case === "rerank");
      assert.equal(env.task.value.query, "what is a cat");
      assert.deepEqual(env.task.value.documents, ["dogs", "cats purr", "tax law"]);
      assert.equal(env.task.value.truncate, true);
      return { case: "scores", value: { perInput: 1, scores: f32([0.3, 0.95, 0.01]), tokenCounts: [7, 9, 8], truncated: [1] } };
    });
    const ctx = ctxFor(InferenceService.method.rerank);
    const res = create(
      RerankResponseSchema,
      await h.service.rerank(
        create(RerankRequestSchema, {
          model: "rr",
          query: "what is a cat",
          documents: ["dogs", "cats purr", "tax law"],
          topK: 2,
          truncate: true,
          returnDocuments: true,
        }),
        ctx,
      ),
    );
    assert.deepEqual(
      res.results.map((r) => [r.index, r.document, r.tokens, r.truncated]),
      [
        [1, "cats purr", 9, true],
        [0, "dogs", 7, false],
      ],
    );
    assert.equal(res.results[0]!.score, Math.fround(0.95));
    assert.equal(res.usage?.promptTokens, 24);
    assert.equal(res.model, "rr");
    assert.equal(ctx.responseHeader.get("shoal-worker"), "w-1");
    // (13 + 4) / 3 -> 6 + 2, (13 + 9) / 3 -> 8 + 2, (13 + 7) / 3 -> 7 + 2
    assert.deepEqual(h.admitted, [8 + 10 + 9]);
  });

  test("Classify: labels from the catalog, by score, top_k per input", async () => {
    h.answer((env) => {
      assert.ok(env.task.case === "classify");
      assert.deepEqual(env.task.value.inputs, ["great", "awful"]);
      return { case: "scores", value: { perInput: 3, scores: f32([0.05, 0.15, 0.8, 0.7, 0.2, 0.1]), tokenCounts: [3, 3] } };
    });
    const res = create(
      ClassifyResponseSchema,
      await h.service.classify(create(ClassifyRequestSchema, { model: "cls", inputs: ["great", "awful"], topK: 2 }), ctxFor(InferenceService.method.classify)),
    );
    assert.deepEqual(
      res.classifications.map((c) => [c.index, c.labels.map((l) => l.label)]),
      [
        [0, ["pos", "neu"]],
        [1, ["neg", "neu"]],
      ],
    );
    assert.equal(res.usage?.totalTokens, 6);
  });

  test("a result of the wrong shape or kind is Internal", async () => {
    h.answer(() => ({ case: "scores", value: { perInput: 2, scores: f32([0.1, 0.2]), tokenCounts: [1] } }));
    await rejects(
      h.service.rerank(create(RerankRequestSchema, { model: "rr", query: "q", documents: ["d"] }), ctxFor(InferenceService.method.rerank)),
      Code.Internal,
      /wrong shape/,
    );
    h.answer(() => ({ case: "scores", value: { perInput: 2, scores: f32([0.1, 0.2]), tokenCounts: [1] } }));
    await rejects(
      h.service.classify(create(ClassifyRequestSchema, { model: "cls", inputs: ["x"] }), ctxFor(InferenceService.method.classify)),
      Code.Internal,
      /wrong shape/,
    );
    h.answer(() => ({ case: "embed", value: { dimensions: 1, vectors: f32([1]), tokenCounts: [1] } }));
    await rejects(
      h.service.classify(create(ClassifyRequestSchema, { model: "cls", inputs: ["x"] }), ctxFor(InferenceService.method.classify)),
      Code.Internal,
      /no scores/,
    );
  });

  test("invalid requests never reach the queue: NotFound, task mismatch, limits", async () => {
    await rejects(
      h.service.rerank(create(RerankRequestSchema, { model: "nope", query: "q", documents: ["d"] }), ctxFor(InferenceService.method.rerank)),
      Code.NotFound,
      /'nope'/,
    );
    await rejects(
      h.service.rerank(create(RerankRequestSchema, { model: "cls", query: "q", documents: ["d"] }), ctxFor(InferenceService.method.rerank)),
      Code.InvalidArgument,
      /call Classify/,
    );
    await rejects(
      h.service.classify(create(ClassifyRequestSchema, { model: "emb", inputs: ["x"] }), ctxFor(InferenceService.method.classify)),
      Code.InvalidArgument,
      /call Embed/,
    );
    await rejects(
      h.service.embed(create(EmbedRequestSchema, { model: "rr", inputs: ["x"] }), ctxFor(InferenceService.method.embed)),
      Code.InvalidArgument,
      /call Rerank/,
    );
    await rejects(
      h.service.rerank(
        create(RerankRequestSchema, { model: "rr", query: "q", documents: Array.from({ length: 9 }, () => "d") }),
        ctxFor(InferenceService.method.rerank),
      ),
      Code.InvalidArgument,
      /^documents: 9 documents exceed the limit of 8 per request$/,
    );
    await rejects(
      h.service.rerank(create(RerankRequestSchema, { model: "rr", query: "", documents: ["d"] }), ctxFor(InferenceService.method.rerank)),
      Code.InvalidArgument,
      /^query: empty text$/,
    );
    assert.equal(h.sent.length, 0);
  });
  test("a caller gone before its job is produced: Canceled, and nothing is sent, not even a cancel", async () => {
    const ac = new AbortController();
    ac.abort();
    await rejects(
      h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs: ["x"] }), ctxFor(InferenceService.method.embed, ac.signal)),
      Code.Canceled,
      /left before its job was sent/,
    );
    assert.deepEqual([h.sent.length, h.held.length, h.cancels, h.abandoned], [0, 0, [], ["not_sent"]]);
  });

  test("a caller that leaves while its job waits behind the request in flight: the job is withdrawn, no cancel", async () => {
    h.state.holding = true;
    const ac = new AbortController();
    const call = h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs: ["x"] }), ctxFor(InferenceService.method.embed, ac.signal));
    await new Promise((r) => setImmediate(r));
    assert.equal(h.held.length, 1);
    ac.abort(new ConnectError("client went away", Code.Canceled));
    await rejects(call, Code.Canceled, /client went away/);
    assert.deepEqual([h.held.length, h.cancels, h.abandoned], [0, [], ["withdrawn"]]);
  });

  test("a caller that leaves after its job went out: a cancel record for that job follows it", async () => {
    h.answer(() => ({ case: undefined }));
    h.state.holding = true;
    const ac = new AbortController();
    const call = h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs: ["x"] }), ctxFor(InferenceService.method.embed, ac.signal));
    await new Promise((r) => setImmediate(r));
    const jobId = decodeEnvelope(h.held[0]!.value as Buffer).jobId;
    h.held.length = 0; // handed to the broker: no longer withdrawable
    ac.abort(new ConnectError("client went away", Code.Canceled));
    await rejects(call, Code.Canceled, /client went away/);
    assert.deepEqual([h.cancels, h.abandoned], [[jobId], ["cancel_sent"]]);
  });
});

describe("a job whose record's fate is unknown (a broker that did not answer in time)", () => {
  const notAcked = (maybeWritten: boolean) => new QueueUnavailableError("job queue unavailable: not acknowledged within 10 ms", maybeWritten);
  const embedOne = (h: ReturnType<typeof harness>) =>
    h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs: ["x"] }), ctxFor(InferenceService.method.embed));

  test("is sent again under the same job id, and the copy answered settles the call: OK, no cancel", async () => {
    const h = harness();
    h.answer(() => ({ case: "embed", value: { dimensions: 1, vectors: f32([1]), tokenCounts: [1], truncated: [] } }));
    h.failures.push(notAcked(true));
    const res = await embedOne(h);
    assert.equal(create(EmbedResponseSchema, res).embeddings.length, 1);
    assert.equal(h.sent.length, 2, "two copies went out");
    assert.equal(h.sent[0]!.envelope.jobId, h.sent[1]!.envelope.jobId);
    assert.deepEqual(h.cancels, []);
  });

  test("a copy that may be written, then copies that failed at once (the producer reconnecting): tried again after a pause until one is acknowledged", async () => {
    const h = harness();
    h.answer(() => ({ case: "embed", value: { dimensions: 1, vectors: f32([1]), tokenCounts: [1], truncated: [] } }));
    h.failures.push(notAcked(true), notAcked(false), notAcked(false), notAcked(false));
    const res = await embedOne(h);
    assert.equal(create(EmbedResponseSchema, res).embeddings.length, 1);
    assert.equal(h.sent.length, 5, "the first copy, three that failed, and the one acknowledged");
    assert.equal(new Set(h.sent.map((x) => x.envelope.jobId)).size, 1);
    assert.deepEqual(h.cancels, []);
  });

  test("never left the gateway: Unavailable at once, not sent again, no cancel", async () => {
    const h = harness();
    h.failures.push(notAcked(false));
    await rejects(embedOne(h), Code.Unavailable, /not acknowledged/);
    assert.equal(h.sent.length, 1);
    assert.deepEqual(h.cancels, []);
  });

  test("every copy unanswered: never Unavailable; the call waits for a result until its deadline, then a cancel follows", async () => {
    const reported: string[] = [];
    const pending = new PendingJobs((jobId) => reported.push(jobId));
    const h = harness({ pending, defaultTimeoutMs: 1_200 });
    h.failures.push(...Array.from({ length: 20 }, () => notAcked(true)));
    await rejects(embedOne(h), Code.DeadlineExceeded, /deadline/i);
    const jobId = h.sent[0]!.envelope.jobId;
    // Copies 500 ms apart while the deadline leaves room for a pause and a bound: three in 1.2 s.
    assert.deepEqual([h.sent.length, h.cancels, h.abandoned], [3, [jobId], ["cancel_sent"]]);
    // Its result, late: dropped, and not reported (the caller was not told it did not run).
    pending.settle(create(JobResultSchema, { jobId, status: JobStatus.OK }));
    assert.deepEqual(reported, []);
  });

  test("a copy that may be written, then one that never left: still waits (the first may run)", async () => {
    const h = harness({ defaultTimeoutMs: 300 });
    h.failures.push(notAcked(true), notAcked(false), notAcked(false));
    await rejects(embedOne(h), Code.DeadlineExceeded, /deadline/i);
    assert.equal(h.cancels.length, 1);
  });
});

describe("Embed through the embedding cache (real EmbedCache, PendingJobs and Admission)", () => {
  /** A worker whose vector of a text is [its length, its first character's code]; tokens: its length + 2. */
  const encode = (env: JobEnvelope): Output => {
    assert.ok(env.task.case === "embed");
    const texts = env.task.value.inputs;
    return {
      case: "embed",
      value: { dimensions: 2, vectors: f32(texts.flatMap((t) => [t.length, t.charCodeAt(0)])), tokenCounts: texts.map((t) => t.length + 2), truncated: [] },
    };
  };
  const embed = async (h: ReturnType<typeof harness>, inputs: string[], lane = Lane.INTERACTIVE) => {
    const ctx = ctxFor(InferenceService.method.embed);
    const res = create(EmbedResponseSchema, await h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs, lane }), ctx));
    return { res, ctx, vectors: res.embeddings.map((e) => e.values) };
  };
  const inputsSent = (h: ReturnType<typeof harness>) => h.sent.map((s) => (s.envelope.task.case === "embed" ? s.envelope.task.value.inputs : []));

  test("only the texts not cached go out; the answer is in input order; usage counts every input, headers what was reused", async () => {
    const h = harness({ embedCache: new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false }) });
    h.answer(encode);
    await embed(h, ["a", "bb"]);
    const { res, ctx, vectors } = await embed(h, ["bb", "ccc", "a", "ccc"]);
    assert.deepEqual(inputsSent(h), [["a", "bb"], ["ccc"]]);
    assert.deepEqual(vectors, [
      [2, 98],
      [3, 99],
      [1, 97],
      [3, 99],
    ]);
    assert.deepEqual(
      res.embeddings.map((e) => [e.index, e.tokens]),
      [
        [0, 4],
        [1, 5],
        [2, 3],
        [3, 5],
      ],
    );
    assert.equal(res.usage?.promptTokens, 17);
    assert.equal(ctx.responseHeader.get("shoal-cached-inputs"), "3");
    assert.equal(ctx.responseHeader.get("shoal-cached-tokens"), "12");
    // Admission took the estimate of the one text sent.
    assert.deepEqual(h.admitted.slice(-1), [3]);

    const hit = await embed(h, ["ccc", "a"]);
    assert.equal(h.sent.length, 2, "all cached: no job");
    assert.deepEqual(hit.vectors, [
      [3, 99],
      [1, 97],
    ]);
    assert.equal(hit.ctx.responseHeader.get("shoal-worker"), "");
    assert.equal(hit.res.timing?.inferenceMs, 0);
    assert.equal(hit.res.usage?.promptTokens, 8);
  });

  test("identical calls at once make one job on a lane; the other lane computes its own", async () => {
    const h = harness({ embedCache: new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false }) });
    h.answer(encode);
    const answers = await Promise.all([embed(h, ["same"]), embed(h, ["same"]), embed(h, ["same"], Lane.BATCH)]);
    assert.deepEqual(inputsSent(h), [["same"], ["same"]]);
    for (const a of answers) assert.deepEqual(a.vectors, [[4, 115]]);
  });

  test("a validation or key refusal comes before the cache: a cached text does not bypass it", async () => {
    const h = harness({ embedCache: new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false }) });
    h.answer(encode);
    await embed(h, ["fine"]);
    await rejects(
      h.service.embed(create(EmbedRequestSchema, { model: "emb", inputs: ["fine", ""] }), ctxFor(InferenceService.method.embed)),
      Code.InvalidArgument,
      /empty/,
    );
    await rejects(
      h.service.embed(create(EmbedRequestSchema, { model: "rr", inputs: ["fine"] }), ctxFor(InferenceService.method.embed)),
      Code.InvalidArgument,
      /rerank/,
    );
  });
});
