import { randomUUID } from "node:crypto";
import { context, SpanStatusCode, trace } from "@opentelemetry/api";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  Attr,
  cancelTopic,
  encodeCancel,
  encodeEnvelope,
  jobTopicFor,
  laneName,
  servedLane,
  startSendSpan,
  traceHeaders,
  type Catalog,
  type CatalogModel,
  type LaneName,
  type ServedLane,
} from "@shoal/common";
import { estimateTokens, type Admission } from "./admission.ts";
import { callerKey, principalKey } from "./auth.ts";
import type { Lane, TimingSchema } from "@shoal/gen/shoal/v1/common_pb.ts";
import {
  ClassifyResponseSchema,
  EmbedResponseSchema,
  type InferenceService,
  RerankResponseSchema,
  TokenizeResponseSchema,
  type ClassifyResponse,
  type EmbedRequest,
  type EmbedResponse,
  type RerankResponse,
  type TokenizeResponse,
} from "@shoal/gen/shoal/v1/inference_pb.ts";
import { Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobCancelSchema, JobEnvelopeSchema, JobStatus, type EmbedOutput, type JobResult, type ScoresOutput } from "@shoal/gen/shoal/v1/job_pb.ts";
import { AdmissionRejectedError, CallCancelledError, JobFailedError, QueueUnavailableError } from "./errors.ts";
import { validateEmbed, validateTokenize, type RequestLimits } from "./embed-request.ts";
import { embeddingsOf } from "./embed-results.ts";
import { callWait, type EmbedCache, type EmbedTaskOptions } from "./embed-cache/embed-cache.ts";
import { outputOf, rowsOf } from "./embed-cache/embed-rows.ts";
import { estimateRerankTokens, validateRerank } from "./rerank-request.ts";
import { labelsOf, validateClassify } from "./classify-request.ts";
import { labelInputs, rankDocuments, readScores } from "./score-results.ts";
import type { JobProducer } from "./job-producer.ts";
import type { PendingJobs } from "./pending-jobs.ts";
import type { RoutedDispatch } from "./dispatch/routed-dispatch.ts";

export interface InferenceDeps {
  readonly catalog: Catalog;
  readonly producer: JobProducer;
  readonly pending: PendingJobs;
  readonly replyTopic: string;
  readonly limits: RequestLimits;
  readonly defaultTimeoutMs: number;
  readonly maxTimeoutMs: number;
  /** False once the gateway drains: new calls get Unavailable, in-flight ones finish. */
  readonly isAccepting: () => boolean;
  /** False while the readiness probe cannot reach Kafka: new calls fail fast with Unavailable. */
  readonly isQueueReachable: () => boolean;
  readonly admission: Admission;
  /** Told the size of every admitted call (turns lane lag into tokens). */
  readonly onAdmitted: (lane: LaneName, tokens: number) => void;
  readonly onRejected: (lane: LaneName, reason: string) => void;
  /** A call ended without its result (caller gone, deadline): what became of its job. */
  readonly onAbandoned?: (how: AbandonedJob, jobId: string, err: unknown) => void;
  /** SHOAL_DISPATCH other than `shared`: the gateway picks each job's worker. Undefined: the pool's shared topics. */
  readonly dispatch?: RoutedDispatch | undefined;
  /** The embedding cache (SHOAL_EMBED_CACHE_BYTES; docs/cache.md); undefined: off. */
  readonly embedCache?: EmbedCache | undefined;
}

/**
 * What became of the job of a call that ended without its result: never produced (the caller left
 * first), withdrawn from the producer's queue before it went out, or produced and followed by a
 * cancel record.
 */
export type AbandonedJob = "not_sent" | "withdrawn" | "cancel_sent";

/** Where a job goes and what it costs. */
interface JobPlan {
  readonly pool: string;
  readonly model: string;
  readonly lane: ServedLane;
  readonly tokens: number;
}

/**
 * Admits, writes the job to Kafka and waits for its result. The call is registered before the
 * record is produced so no result can slip past; a produce failure unregisters it and surfaces
 * Unavailable. A call that ends without its result (deadline, caller gone) sends a cancel so a
 * worker that has not started the job skips it.
 */
async function submit(
  deps: InferenceDeps,
  ctx: HandlerContext,
  plan: JobPlan,
  build: (jobId: string, deadlineUnixMs: number, now: number) => { topic: string; value: Uint8Array },
): Promise<JobResult> {
  if (!deps.isAccepting()) throw new QueueUnavailableError("gateway is shutting down; retry on another replica");
  if (!deps.isQueueReachable()) throw new QueueUnavailableError("the job queue (Kafka) is unreachable; retry later");
  const lane = laneName(plan.lane);
  // Fair share per tenant; per connection when keys are off (set by the HTTP front).
  const caller = ctx.values.get(principalKey)?.tenant ?? ctx.values.get(callerKey);
  const ticket = deps.admission.tryAdmit(lane, plan.tokens, caller);
  if (!ticket.ok) {
    deps.onRejected(lane, ticket.reason);
    throw new AdmissionRejectedError(ticket.message, ticket.retryAfterMs);
  }
  deps.onAdmitted(lane, plan.tokens);
  try {
    return await enqueueAndWait(deps, ctx, plan, build);
  } finally {
    ticket.release();
  }
}

async function enqueueAndWait(
  deps: InferenceDeps,
  ctx: HandlerContext,
  plan: JobPlan,
  build: (jobId: string, deadlineUnixMs: number, now: number) => { topic: string; value: Uint8Array },
): Promise<JobResult> {
  if (ctx.signal.aborted) {
    // Gone while the request was read or admitted: nothing to compute, nothing to cancel.
    deps.onAbandoned?.("not_sent", "", ctx.signal.reason);
    throw new CallCancelledError("the caller left before its job was sent");
  }
  const now = Date.now();
  const timeoutMs = Math.min(ctx.timeoutMs() ?? deps.defaultTimeoutMs, deps.maxTimeoutMs);
  const deadlineUnixMs = now + timeoutMs;
  const jobId = randomUUID();
  const result = deps.pending.register(jobId, deadlineUnixMs, ctx.signal, now);
  const { topic: sharedTopic, value } = build(jobId, deadlineUnixMs, now);
  const placement = deps.dispatch?.place({ jobId, pool: plan.pool, lane: plan.lane, model: plan.model, tokens: plan.tokens, sharedTopic });
  const topic = placement?.topic ?? sharedTopic;
  const span = startSendSpan(topic, { [Attr.MESSAGING_MESSAGE_ID]: jobId, [Attr.JOB_ID]: jobId });
  const headers = traceHeaders(trace.setSpan(context.active(), span));
  const message = { key: jobId, value: Buffer.from(value.buffer, value.byteOffset, value.byteLength), headers };
  // Watched from now on (the finally below ends it), so a job is never left behind by a worker that goes away.
  if (placement !== undefined) deps.dispatch?.sent(jobId, placement, message, sharedTopic);
  let maybeWritten = false;
  // The record now going out: a copy has a key of its own, so the partitioner sends it to
  // another partition than the silent leader's, most likely (workers read the job id from the envelope).
  let current = message;
  /** Sends copy `copy` of the job. */
  const send = (copy: number): void => {
    if (copy > 1 && !deps.pending.waiting(jobId)) {
      // Settled (an earlier copy's result) or ended while this copy waited for its turn.
      span.end();
      return;
    }
    current = copy === 1 ? message : { ...message, key: `${jobId}#${copy}` };
    const sentAt = Date.now();
    deps.producer.send(topic, current).then(
      () => span.end(),
      (err: unknown) => {
        maybeWritten ||= err instanceof QueueUnavailableError && err.maybeWritten;
        if (!maybeWritten) {
          // No copy left the gateway: nothing can run, and the caller may try elsewhere at once.
          span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
          span.end();
          deps.pending.fail(jobId, err);
          // A detector, not a path: a computed result for this job would mean a copy did go out.
          deps.pending.givenUp(jobId);
          return;
        }
        // A copy went out and the broker did not answer (a silent leader, a leader killed before it
        // answered, one request holding records of a live and a dead leader): it may be written
        // and may run. Never answered Unavailable then: a caller told so would retry while its job
        // runs unseen. Another copy goes out under the same job id until one is acknowledged, while
        // the deadline leaves room for one more bound: at once after a copy that waited out its
        // bound, after a pause after one that failed sooner (a producer that refreshes its metadata
        // or reconnects). The copy answered first settles the call, a later one is dropped as a
        // duplicate. Otherwise the call waits for a result until its deadline, which ends it
        // DeadlineExceeded and sends a cancel.
        const pauseMs = Date.now() - sentAt >= deps.producer.ackTimeoutMs ? 0 : COPY_PAUSE_MS;
        if (copy < MAX_COPIES && deps.pending.waiting(jobId) && deadlineUnixMs - Date.now() > deps.producer.ackTimeoutMs + pauseMs) {
          span.addEvent("sent again: not acknowledged", { copy });
          setTimeout(() => send(copy + 1), pauseMs);
          return;
        }
        span.addEvent("not acknowledged; waiting for a copy's result until the deadline", { copy });
        span.end();
      },
    );
  };
  send(1);
  let outcome: JobResult;
  try {
    outcome = await result;
  } catch (err) {
    if (!(err instanceof QueueUnavailableError)) {
      // Still waiting behind the produce request in flight: taken back, so no worker ever sees it.
      if (deps.producer.withdraw(current)) deps.onAbandoned?.("withdrawn", jobId, err);
      else {
        sendCancel(deps, plan.pool, jobId, deadlineUnixMs);
        deps.onAbandoned?.("cancel_sent", jobId, err);
      }
    }
    throw err;
  } finally {
    deps.dispatch?.ended(jobId);
  }
  if (outcome.status !== JobStatus.OK) throw new JobFailedError(outcome.status, outcome.message || JobStatus[outcome.status]);
  return outcome;
}

/** Copies of a job sent at most, the first included (see enqueueAndWait). */
const MAX_COPIES = 20;
/** The pause before another copy when the last one failed before its bound. */
const COPY_PAUSE_MS = 500;

/** Asks the workers to skip a job whose call ended without its result (best effort). */
function sendCancel(deps: InferenceDeps, pool: string, jobId: string, deadlineUnixMs: number): void {
  const cancel = encodeCancel(create(JobCancelSchema, { jobId, deadlineUnixMs: BigInt(deadlineUnixMs) }));
  deps.producer.send(cancelTopic(pool), { key: jobId, value: Buffer.from(cancel) }).catch(() => undefined);
}

function setTimingHeaders(ctx: HandlerContext, result: JobResult | undefined, totalMs: number): void {
  const t = result?.timings;
  ctx.responseHeader.set("shoal-queue-ms", (t?.queueMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-held-ms", (t?.heldMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-deliveries", String(t?.deliveries ?? 0));
  ctx.responseHeader.set("shoal-tokenize-ms", (t?.tokenizeMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-inference-ms", (t?.inferenceMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-total-ms", totalMs.toFixed(2));
  ctx.responseHeader.set("shoal-worker", result?.workerId ?? "");
}

/** The envelope's task: one member of JobEnvelope's `task` oneof. */
type TaskInit = MessageInitShape<typeof JobEnvelopeSchema>["task"];

/** What one RPC contributes to the shared path; everything else is the same for every task. */
interface JobCall {
  /** The model id and lane the request names. */
  readonly model: string;
  readonly lane: Lane;
  /** Checks the request against the catalog and the limits; the model it names. */
  validate(): CatalogModel;
  /** Estimated prompt tokens: what admission and the key's token rate are charged. */
  tokens(model: CatalogModel): number;
  task(model: CatalogModel): TaskInit;
}

/** A call that may use its model, is valid, and whose key's token rate took its cost. */
interface AcceptedCall {
  readonly model: CatalogModel;
  readonly lane: ServedLane;
  readonly tenant: string;
}

/**
 * The checks every InferenceService call passes first: the key may use the model (checked before
 * validation, so a key learns nothing about models outside its list), the request is valid, and
 * the key's token rate takes its whole estimated cost (answers from the embedding cache included).
 */
function accept(ctx: HandlerContext, call: JobCall): AcceptedCall {
  // Set by the API key check (Connect interceptor or the OpenAI endpoint); undefined when keys are off.
  const principal = ctx.values.get(principalKey);
  principal?.authorizeModel(call.model);
  const model = call.validate();
  const lane = servedLane(call.lane, principal?.lane);
  principal?.chargeTokens(call.tokens(model));
  return { model, lane, tenant: principal?.tenant ?? "" };
}

/** Admission takes the job's `tokens`, and the job with `task` goes through the queue. */
function submitTask(deps: InferenceDeps, ctx: HandlerContext, accepted: AcceptedCall, task: TaskInit, tokens: number): Promise<JobResult> {
  const { model, lane, tenant } = accepted;
  const plan = { pool: model.pool, model: model.id, lane, tokens };
  return submit(deps, ctx, plan, (jobId, deadlineUnixMs, now) => ({
    topic: jobTopicFor(deps.catalog.pools.get(model.pool)!, lane, model.id),
    value: encodeEnvelope(
      create(JobEnvelopeSchema, {
        jobId,
        // The concrete model (an alias was resolved once, in validate) and the revision it serves.
        model: model.id,
        modelRevision: model.revision ?? "",
        deadlineUnixMs: BigInt(deadlineUnixMs),
        enqueuedUnixMs: BigInt(now),
        replyTo: { topic: deps.replyTopic, partition: 0 },
        attempt: 1,
        lane,
        tenant,
        task,
      }),
    ),
  }));
}

/** The path every InferenceService call takes: {@link accept}, then admission and the queue. */
async function runJob(deps: InferenceDeps, ctx: HandlerContext, call: JobCall): Promise<{ model: CatalogModel; result: JobResult }> {
  const accepted = accept(ctx, call);
  const result = await submitTask(deps, ctx, accepted, call.task(accepted.model), call.tokens(accepted.model));
  return { model: accepted.model, result };
}

/**
 * An Embed call through the embedding cache: the texts neither cached nor in flight go out as
 * one job, estimated and admitted for those texts alone; the answer is assembled in input order.
 * Undefined when the model's results are not cached. `timing` and the timing headers are the
 * call's own job's (zeros when it needed none); `reused*` say what it did not compute.
 */
async function embedCached(
  deps: InferenceDeps,
  cache: EmbedCache,
  ctx: HandlerContext,
  req: EmbedRequest,
  accepted: AcceptedCall,
  options: EmbedTaskOptions,
  truncate: boolean,
): Promise<{ output: EmbedOutput; result: JobResult | undefined; reusedInputs: number; reusedTokens: number } | undefined> {
  const scope = cache.scopeOf(accepted.model, accepted.tenant, options);
  if (scope === undefined) return undefined;
  const timeoutMs = Math.min(ctx.timeoutMs() ?? deps.defaultTimeoutMs, deps.maxTimeoutMs);
  let result: JobResult | undefined;
  const found = await cache.embed(
    scope,
    laneName(accepted.lane),
    req.inputs,
    async (texts) => {
      const tokens = estimateTokens(texts, accepted.model.spec.maxSequenceLength, truncate);
      const r = await submitTask(deps, ctx, accepted, { case: "embed", value: { ...options, inputs: texts } }, tokens);
      if (r.output.case !== "embed") throw new JobFailedError(JobStatus.INTERNAL, "worker returned no embeddings");
      result = r;
      return rowsOf(r.output.value, texts.length);
    },
    callWait(ctx.signal, Date.now() + timeoutMs, timeoutMs),
  );
  return { output: outputOf(found.rows), result, reusedInputs: found.reusedInputs, reusedTokens: found.reusedTokens };
}

/**
 * Sets the timing headers and returns the response's Timing; `started` is the call's start.
 * No result (an Embed answered from the cache alone): zeros but the total, no worker.
 */
function finish(ctx: HandlerContext, result: JobResult | undefined, started: number): MessageInitShape<typeof TimingSchema> {
  const totalMs = performance.now() - started;
  setTimingHeaders(ctx, result, totalMs);
  return {
    queueMs: result?.timings?.queueMs ?? 0,
    heldMs: result?.timings?.heldMs ?? 0,
    deliveries: result?.timings?.deliveries ?? 0,
    tokenizeMs: result?.timings?.tokenizeMs ?? 0,
    inferenceMs: result?.timings?.inferenceMs ?? 0,
    totalMs,
  };
}

/** The scores a rerank or classify job returned; Internal when the worker sent something else. */
function scoresOf(result: JobResult): ScoresOutput {
  if (result.output.case !== "scores") throw new JobFailedError(JobStatus.INTERNAL, "worker returned no scores");
  return result.output.value;
}

/** InferenceService: validates, enqueues a job envelope, and answers from the job's result. */
export function createInferenceService(deps: InferenceDeps): ServiceImpl<typeof InferenceService> {
  return {
    async embed(req, ctx): Promise<EmbedResponse> {
      const started = performance.now();
      const o = req.options;
      const truncation = o?.truncation ?? Truncation.UNSPECIFIED;
      // Old workers read only the boolean: it says whether to cut (they always cut the end).
      const truncate = truncation === Truncation.UNSPECIFIED ? (o?.truncate ?? false) : truncation !== Truncation.NONE;
      // The job's options, the inputs aside: also what the embedding cache keys on.
      const options = (m: CatalogModel): EmbedTaskOptions => ({
        normalize: o?.normalize ?? m.spec.normalize,
        truncate,
        truncation,
        inputType: o?.inputType,
        dimensions: o?.dimensions === m.spec.dimensions ? 0 : (o?.dimensions ?? 0),
        embeddingTypes: o?.embeddingTypes,
      });
      const call: JobCall = {
        model: req.model,
        lane: req.lane,
        validate: () => validateEmbed(req, deps.catalog.models, deps.limits),
        tokens: (m) => estimateTokens(req.inputs, m.spec.maxSequenceLength, truncate),
        task: (m) => ({ case: "embed", value: { ...options(m), inputs: req.inputs } }),
      };
      const accepted = accept(ctx, call);
      const model = accepted.model;
      const cached = deps.embedCache && (await embedCached(deps, deps.embedCache, ctx, req, accepted, options(model), truncate));
      let out: EmbedOutput;
      let result: JobResult | undefined;
      if (cached) {
        ({ output: out, result } = cached);
        ctx.responseHeader.set("shoal-cached-inputs", String(cached.reusedInputs));
        ctx.responseHeader.set("shoal-cached-tokens", String(cached.reusedTokens));
      } else {
        result = await submitTask(deps, ctx, accepted, call.task(model), call.tokens(model));
        if (result.output.case !== "embed") throw new JobFailedError(JobStatus.INTERNAL, "worker returned no embeddings");
        out = result.output.value;
      }
      const { embeddings, promptTokens } = embeddingsOf(out, req.inputs.length, o?.encoding ?? 0);
      const timing = finish(ctx, result, started);
      return create(EmbedResponseSchema, {
        model: model.id,
        embeddings,
        usage: { promptTokens, totalTokens: promptTokens },
        timing,
        dimensions: out.dimensions,
        maxSequenceLength: out.maxSequenceLength || model.spec.maxSequenceLength,
      });
    },

    async tokenize(req, ctx): Promise<TokenizeResponse> {
      const started = performance.now();
      const truncate = req.truncation === Truncation.START || req.truncation === Truncation.END;
      const { model, result } = await runJob(deps, ctx, {
        model: req.model,
        lane: req.lane,
        validate: () => validateTokenize(req, deps.catalog.models, deps.limits),
        // Nothing is computed, but the worker tokenizes: charged like an embed of the texts.
        tokens: (m) => estimateTokens(req.inputs, m.spec.maxSequenceLength, truncate),
        task: () => ({ case: "tokenize", value: { inputs: req.inputs, inputType: req.inputType, truncation: req.truncation } }),
      });
      if (result.output.case !== "tokens" || result.output.value.inputs.length !== req.inputs.length) {
        throw new JobFailedError(JobStatus.INTERNAL, "worker returned no tokens");
      }
      const out = result.output.value;
      const promptTokens = out.inputs.reduce((n, t) => n + t.ids.length, 0);
      const timing = finish(ctx, result, started);
      return create(TokenizeResponseSchema, {
        model: model.id,
        tokenized: out.inputs,
        maxSequenceLength: out.maxSequenceLength,
        usage: { promptTokens, totalTokens: promptTokens },
        timing,
      });
    },

    async rerank(req, ctx): Promise<RerankResponse> {
      const started = performance.now();
      const { model, result } = await runJob(deps, ctx, {
        model: req.model,
        lane: req.lane,
        validate: () => validateRerank(req, deps.catalog.models, deps.limits),
        tokens: (m) => estimateRerankTokens(req.query, req.documents, m.spec.maxSequenceLength, req.truncate),
        task: () => ({ case: "rerank", value: { query: req.query, documents: req.documents, truncate: req.truncate } }),
      });
      const rows = readScores(scoresOf(result), req.documents.length, 1);
      const { results, promptTokens } = rankDocuments(rows, req.documents, { topK: req.topK, returnDocuments: req.returnDocuments });
      const timing = finish(ctx, result, started);
      return create(RerankResponseSchema, {
        model: model.id,
        results,
        usage: { promptTokens, totalTokens: promptTokens },
        timing,
      });
    },

    async classify(req, ctx): Promise<ClassifyResponse> {
      const started = performance.now();
      const { model, result } = await runJob(deps, ctx, {
        model: req.model,
        lane: req.lane,
        validate: () => validateClassify(req, deps.catalog.models, deps.limits),
        tokens: (m) => estimateTokens(req.inputs, m.spec.maxSequenceLength, req.truncate),
        task: () => ({ case: "classify", value: { inputs: req.inputs, truncate: req.truncate } }),
      });
      const labels = labelsOf(model);
      const rows = readScores(scoresOf(result), req.inputs.length, labels.length);
      const { classifications, promptTokens } = labelInputs(rows, req.inputs.length, labels, req.topK);
      const timing = finish(ctx, result, started);
      return create(ClassifyResponseSchema, {
        model: model.id,
        classifications,
        usage: { promptTokens, totalTokens: promptTokens },
        timing,
      });
    },
  };
}
