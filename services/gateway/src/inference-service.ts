import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { bytesToVectors, encodeEnvelope, vectorsToBytes, jobsTopic, type Catalog, type ServedLane } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InferenceService, VectorEncoding, type EmbedResponse, EmbedResponseSchema } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { JobEnvelopeSchema, JobStatus, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { JobFailedError, QueueUnavailableError } from "./errors.ts";
import { validateEmbed, type RequestLimits } from "./embed-request.ts";
import type { JobProducer } from "./job-producer.ts";
import type { PendingJobs } from "./pending-jobs.ts";

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
}

/** Resolves a request's lane; LANE_UNSPECIFIED becomes the interactive lane. */
function servedLane(lane: Lane): ServedLane {
  return lane === Lane.BATCH ? Lane.BATCH : Lane.INTERACTIVE;
}

/**
 * Writes the job to Kafka and waits for its result. The call is registered before the record is
 * produced so no result can slip past; a produce failure unregisters it and surfaces Unavailable.
 */
async function submit(
  deps: InferenceDeps,
  ctx: HandlerContext,
  build: (jobId: string, deadlineUnixMs: number, now: number) => { topic: string; value: Uint8Array },
): Promise<JobResult> {
  if (!deps.isAccepting()) throw new QueueUnavailableError("gateway is shutting down; retry on another replica");
  const now = Date.now();
  const timeoutMs = Math.min(ctx.timeoutMs() ?? deps.defaultTimeoutMs, deps.maxTimeoutMs);
  const deadlineUnixMs = now + timeoutMs;
  const jobId = randomUUID();
  const result = deps.pending.register(jobId, deadlineUnixMs, ctx.signal, now);
  const { topic, value } = build(jobId, deadlineUnixMs, now);
  deps.producer.send(topic, { key: jobId, value: Buffer.from(value.buffer, value.byteOffset, value.byteLength) }).catch(
    (err: unknown) => deps.pending.fail(jobId, err),
  );
  const outcome = await result;
  if (outcome.status !== JobStatus.OK) throw new JobFailedError(outcome.status, outcome.message || JobStatus[outcome.status]);
  return outcome;
}

function setTimingHeaders(ctx: HandlerContext, result: JobResult, totalMs: number): void {
  const t = result.timings;
  ctx.responseHeader.set("shoal-queue-ms", (t?.queueMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-tokenize-ms", (t?.tokenizeMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-inference-ms", (t?.inferenceMs ?? 0).toFixed(2));
  ctx.responseHeader.set("shoal-total-ms", totalMs.toFixed(2));
  ctx.responseHeader.set("shoal-worker", result.workerId);
}

/** InferenceService: validates, enqueues a job envelope, and answers from the job's result. */
export function createInferenceService(deps: InferenceDeps): ServiceImpl<typeof InferenceService> {
  return {
    async embed(req, ctx): Promise<EmbedResponse> {
      const started = performance.now();
      const model = validateEmbed(req, deps.catalog.models, deps.limits);
      const lane = servedLane(req.lane);
      const result = await submit(deps, ctx, (jobId, deadlineUnixMs, now) => ({
        topic: jobsTopic(model.pool, lane),
        value: encodeEnvelope(
          create(JobEnvelopeSchema, {
            jobId,
            model: model.id,
            deadlineUnixMs: BigInt(deadlineUnixMs),
            enqueuedUnixMs: BigInt(now),
            replyTo: { topic: deps.replyTopic, partition: 0 },
            attempt: 1,
            lane,
            task: {
              case: "embed",
              value: {
                inputs: req.inputs,
                normalize: req.options?.normalize ?? model.spec.normalize,
                truncate: req.options?.truncate ?? false,
              },
            },
          }),
        ),
      }));
      if (result.output.case !== "embed") throw new JobFailedError(JobStatus.INTERNAL, "worker returned no embeddings");
      const out = result.output.value;
      const vectors = bytesToVectors(out.vectors);
      const dims = out.dimensions;
      if (dims === 0 || vectors.length !== dims * req.inputs.length || out.tokenCounts.length !== req.inputs.length) {
        throw new JobFailedError(JobStatus.INTERNAL, "worker returned a result of the wrong shape");
      }
      const truncated = new Set(out.truncated);
      const packed = req.options?.encoding === VectorEncoding.FLOAT32_LE;
      let promptTokens = 0;
      const embeddings = req.inputs.map((_, i) => {
        const tokens = out.tokenCounts[i] ?? 0;
        promptTokens += tokens;
        const row = vectors.subarray(i * dims, (i + 1) * dims);
        return packed
          ? { index: i, float32Le: vectorsToBytes(row), tokens, truncated: truncated.has(i) }
          : { index: i, values: Array.from(row), tokens, truncated: truncated.has(i) };
      });
      const totalMs = performance.now() - started;
      setTimingHeaders(ctx, result, totalMs);
      return create(EmbedResponseSchema, {
        model: model.id,
        embeddings,
        usage: { promptTokens, totalTokens: promptTokens },
        timing: {
          queueMs: result.timings?.queueMs ?? 0,
          tokenizeMs: result.timings?.tokenizeMs ?? 0,
          inferenceMs: result.timings?.inferenceMs ?? 0,
          totalMs,
        },
      });
    },
  };
}
