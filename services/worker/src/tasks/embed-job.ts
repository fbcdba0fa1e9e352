import { create } from "@bufbuild/protobuf";
import { vectorsToBytes } from "@shoal/common";
import {
  JobResultSchema,
  JobStatus,
  type EmbedTask,
  type JobEnvelope,
  type JobResult,
} from "@shoal/gen/shoal/v1/job_pb.ts";
import type { BatchItem, LaneName } from "../batching/batcher.ts";
import type { EncodedText } from "../runtime/text-tokenizer.ts";
import { l2normalize } from "../runtime/l2-normalize.ts";
import type { JobTrace } from "../telemetry/job-trace.ts";

/** One text of an embed job, as the batcher sees it. */
export interface EmbedItem extends BatchItem {
  readonly job: EmbedJob;
  readonly index: number;
  readonly ids: Int32Array;
}

/** What the batch that computed some of a job's items reports back. */
export interface BatchReport {
  readonly startedAtMs: number;
  readonly inferenceMs: number;
  readonly items: number;
  readonly paddedTokens: number;
}

/**
 * An embed job in flight on a worker: its tokenized texts, the vectors computed so far, and the
 * result once every text has its vector (or the job failed). Finishes exactly once.
 */
export class EmbedJob {
  readonly items: readonly EmbedItem[];
  private readonly vectors: Float32Array;
  private remaining: number;
  private queueMs: number | undefined;
  private inferenceMs = 0;
  private batchItems = 0;
  private batchTokens = 0;
  private finished = false;

  constructor(
    readonly envelope: JobEnvelope,
    private readonly task: EmbedTask,
    private readonly encoded: readonly EncodedText[],
    readonly dimensions: number,
    private readonly tokenizeMs: number,
    schedule: { enqueuedAtMs: number; lane: LaneName; deadlineMs: number },
    readonly trace: JobTrace,
    private readonly onFinish: (result: JobResult) => void,
  ) {
    this.vectors = new Float32Array(encoded.length * dimensions);
    this.remaining = encoded.length;
    this.items = encoded.map((e, index) => ({ job: this, index, ids: e.ids, tokens: e.tokenCount, ...schedule }));
  }

  get id(): string {
    return this.envelope.jobId;
  }

  get done(): boolean {
    return this.finished;
  }

  /** Whether the job's deadline has passed at `nowUnixMs`. */
  expired(nowUnixMs: number): boolean {
    return this.envelope.deadlineUnixMs > 0n && nowUnixMs >= Number(this.envelope.deadlineUnixMs);
  }

  /** Stores the vector of item `index`; finishes the job when it was the last one. */
  accept(index: number, vector: Float32Array, batch: BatchReport): void {
    if (this.finished) return;
    this.vectors.set(vector, index * this.dimensions);
    this.queueMs ??= Math.max(0, Date.now() - Number(this.envelope.enqueuedUnixMs) - (performance.now() - batch.startedAtMs));
    this.inferenceMs = Math.max(this.inferenceMs, batch.inferenceMs);
    this.batchItems = Math.max(this.batchItems, batch.items);
    this.batchTokens = Math.max(this.batchTokens, batch.paddedTokens);
    this.remaining -= 1;
    if (this.remaining === 0) this.succeed();
  }

  /** Ends the job with a non-OK status (remaining items are skipped by the batch runner). */
  fail(status: JobStatus, message: string): void {
    if (this.finished) return;
    this.finished = true;
    this.onFinish(create(JobResultSchema, { jobId: this.id, status, message, attempt: this.envelope.attempt }));
  }

  private succeed(): void {
    this.finished = true;
    if (this.task.normalize) l2normalize(this.vectors, this.dimensions);
    const truncated: number[] = [];
    this.encoded.forEach((e, i) => e.truncated && truncated.push(i));
    this.onFinish(
      create(JobResultSchema, {
        jobId: this.id,
        status: JobStatus.OK,
        attempt: this.envelope.attempt,
        timings: {
          queueMs: this.queueMs ?? 0,
          tokenizeMs: this.tokenizeMs,
          inferenceMs: this.inferenceMs,
          batchItems: this.batchItems,
          batchTokens: this.batchTokens,
        },
        output: {
          case: "embed",
          value: {
            dimensions: this.dimensions,
            vectors: vectorsToBytes(this.vectors),
            tokenCounts: this.encoded.map((e) => e.tokenCount),
            truncated,
          },
        },
      }),
    );
  }
}
