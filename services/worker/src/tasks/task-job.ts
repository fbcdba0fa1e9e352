import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { JobResultSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { LaneName } from "@shoal/common";
import type { BatchItem } from "../batching/batcher.ts";
import type { JobTrace } from "../telemetry/job-trace.ts";

/** One tokenized input of a job: a text, or a (query, document) pair. */
export interface EncodedInput {
  readonly ids: Int32Array;
  /** Token types (segment ids) of a pair; undefined for single texts (all 0). */
  readonly typeIds?: Uint8Array | undefined;
  readonly tokenCount: number;
  readonly truncated: boolean;
}

/** One input of a job, as the batcher sees it. */
export interface TaskItem extends BatchItem {
  readonly job: TaskJob;
  readonly index: number;
  readonly ids: Int32Array;
  readonly typeIds: Uint8Array | undefined;
}

/** What the batch that computed some of a job's items reports back. */
export interface BatchReport {
  readonly startedAtMs: number;
  readonly inferenceMs: number;
  readonly items: number;
  readonly paddedTokens: number;
}

/** A job's output, built from its rows once all are in (the JobResult `output` oneof). */
export type JobOutput = NonNullable<MessageInitShape<typeof JobResultSchema>["output"]>;

/** Turns a finished job's rows (inputs × width, in input order) into its output. */
export type OutputShaper = (rows: Float32Array, encoded: readonly EncodedInput[]) => JobOutput;

/** When a job arrived, its lane and when it is due, in the runner's clock. */
export interface JobSchedule {
  readonly enqueuedAtMs: number;
  readonly lane: LaneName;
  readonly deadlineMs: number;
}

/**
 * A job in flight on a worker, of any task: its tokenized inputs, the rows the model computed so
 * far (a vector, a logit or label logits per input), and the result once every input has its row
 * (or the job failed). Finishes exactly once.
 */
export class TaskJob {
  readonly items: readonly TaskItem[];
  private readonly rows: Float32Array;
  private remaining: number;
  private queueMs: number | undefined;
  private inferenceMs = 0;
  private batchItems = 0;
  private batchTokens = 0;
  private finished = false;

  constructor(
    readonly envelope: JobEnvelope,
    private readonly encoded: readonly EncodedInput[],
    /** Values per input the model computes. */
    readonly width: number,
    private readonly tokenizeMs: number,
    schedule: JobSchedule,
    readonly trace: JobTrace,
    private readonly shape: OutputShaper,
    private readonly onFinish: (result: JobResult) => void,
  ) {
    this.rows = new Float32Array(encoded.length * width);
    this.remaining = encoded.length;
    this.items = encoded.map((e, index) => ({ job: this, group: this, index, ids: e.ids, typeIds: e.typeIds, tokens: e.tokenCount, ...schedule }));
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

  /** Stores the row of item `index`; finishes the job when it was the last one. */
  accept(index: number, row: Float32Array, batch: BatchReport): void {
    if (this.finished) return;
    this.rows.set(row, index * this.width);
    this.queueMs ??= Math.max(0, Date.now() - Number(this.envelope.enqueuedUnixMs) - (performance.now() - batch.startedAtMs));
    this.inferenceMs = Math.max(this.inferenceMs, batch.inferenceMs);
    this.batchItems = Math.max(this.batchItems, batch.items);
    this.batchTokens = Math.max(this.batchTokens, batch.paddedTokens);
    this.remaining -= 1;
    if (this.remaining === 0) this.succeed();
  }

  /** Finishes a job that has nothing to compute (Tokenize): its shaper builds the output alone. */
  finishWithoutRows(): void {
    if (this.finished || this.remaining > 0) return;
    this.succeed();
  }

  /** Ends the job with a non-OK status (remaining items are skipped by the batch runner). */
  fail(status: JobStatus, message: string): void {
    if (this.finished) return;
    this.finished = true;
    this.onFinish(create(JobResultSchema, { jobId: this.id, status, message, attempt: this.envelope.attempt }));
  }

  private succeed(): void {
    this.finished = true;
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
        output: this.shape(this.rows, this.encoded),
      }),
    );
  }
}
