import { SpanStatusCode, type SpanContext } from "@opentelemetry/api";
import { Attr, type Logger } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobStatus, type EmbedTask, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { Batcher, type BatcherOptions, type CloseReason } from "../batching/batcher.ts";
import type { Clock } from "../batching/clock.ts";
import { InputTooLongError } from "../runtime/errors.ts";
import type { InferencePool } from "../runtime/inference-pool.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { planSubBatches } from "../runtime/padding-plan.ts";
import type { EncodedText, TextTokenizer } from "../runtime/text-tokenizer.ts";
import { startBatchSpan, type JobTrace } from "../telemetry/job-trace.ts";
import { EmbedJob, type EmbedItem } from "./embed-job.ts";

export interface EmbedRunnerOptions {
  readonly batching: BatcherOptions;
  /** Per-call cost of a model run in token-equivalents; trades padding against call count. */
  readonly perCallOverheadTokens: number;
  /** Told about every batch run (metrics). */
  readonly onBatch?: (report: BatchRunReport) => void;
  /** Whether the job's caller left (a cancel arrived): such jobs are not computed. */
  readonly isCancelled?: (jobId: string) => boolean;
}

/** What one batch run did. */
export interface BatchRunReport {
  readonly model: string;
  readonly reason: CloseReason;
  readonly items: number;
  readonly usefulTokens: number;
  readonly paddedTokens: number;
  readonly calls: number;
  readonly inferenceMs: number;
}

/** Counters a runner keeps for tests, metrics and benchmarks. */
export interface RunnerStats {
  batches: number;
  itemsComputed: number;
  usefulTokens: number;
  paddedTokens: number;
  jobsExpiredBeforeCompute: number;
  jobsCancelledBeforeCompute: number;
}

/**
 * Serves one embedding model on this worker: tokenizes each job's texts on arrival, batches texts
 * across jobs, runs the model in its inference threads, and finishes jobs as their vectors arrive.
 */
export class EmbedRunner {
  private readonly batcher: Batcher<EmbedItem>;
  readonly stats: RunnerStats = { batches: 0, itemsComputed: 0, usefulTokens: 0, paddedTokens: 0, jobsExpiredBeforeCompute: 0, jobsCancelledBeforeCompute: 0 };

  constructor(
    readonly spec: ModelSpec,
    private readonly tokenizer: TextTokenizer,
    private readonly pool: InferencePool,
    private readonly opts: EmbedRunnerOptions,
    clock: Clock,
    private readonly logger: Logger,
  ) {
    this.batcher = new Batcher<EmbedItem>(opts.batching, clock, (items, reason) => this.runBatch(items, reason));
  }

  /**
   * Starts a job. Input problems finish it at once with INVALID_ARGUMENT; otherwise its texts
   * join the batcher and `onFinish` runs when the last vector is in.
   */
  submit(envelope: JobEnvelope, task: EmbedTask, trace: JobTrace, onFinish: (result: JobResult) => void, nowMs: number): EmbedJob {
    const started = performance.now();
    const encoded: EncodedText[] = [];
    let problem: string | undefined;
    for (let i = 0; i < task.inputs.length && problem === undefined; i++) {
      const text = task.inputs[i] ?? "";
      if (text.trim() === "") problem = `inputs[${i}]: empty text`;
      else {
        try {
          encoded.push(this.tokenizer.encode(text, { truncate: task.truncate }));
        } catch (err) {
          if (!(err instanceof InputTooLongError)) throw err;
          problem = `inputs[${i}]: ${err.tokens} tokens exceed the limit of ${err.limit} tokens of model '${this.spec.id}' (set truncate to cut long inputs)`;
        }
      }
    }
    if (task.inputs.length === 0) problem = "inputs: at least one text is required";
    const ended = performance.now();
    const tokenizeMs = ended - started;
    trace.tokenized(started, ended, encoded.reduce((n, e) => n + e.tokenCount, 0));
    const deadlineUnix = Number(envelope.deadlineUnixMs);
    const schedule = {
      enqueuedAtMs: nowMs,
      lane: envelope.lane === Lane.BATCH ? ("batch" as const) : ("interactive" as const),
      deadlineMs: deadlineUnix > 0 ? nowMs + (deadlineUnix - Date.now()) : Infinity,
    };
    const job = new EmbedJob(envelope, task, encoded, this.spec.dimensions, tokenizeMs, schedule, trace, onFinish);
    if (problem !== undefined) job.fail(JobStatus.INVALID_ARGUMENT, problem);
    else this.batcher.push(...job.items);
    return job;
  }

  /** Resolves once every submitted text has been computed or skipped. */
  idle(): Promise<void> {
    return this.batcher.idle();
  }

  private async runBatch(batch: EmbedItem[], reason: CloseReason): Promise<void> {
    const nowUnix = Date.now();
    // Jobs that finished (failed), were cancelled or expired while queued are not computed.
    const items = batch.filter((item) => {
      if (item.job.done) return false;
      if (this.opts.isCancelled?.(item.job.id)) {
        this.stats.jobsCancelledBeforeCompute += 1;
        item.job.fail(JobStatus.CANCELLED, "the caller left before the job ran; nothing was computed");
        return false;
      }
      if (item.job.expired(nowUnix)) {
        this.stats.jobsExpiredBeforeCompute += 1;
        item.job.fail(JobStatus.DEADLINE_EXCEEDED, "deadline passed before the job ran; nothing was computed");
        return false;
      }
      return true;
    });
    if (items.length === 0) return;
    const startedAtMs = performance.now();
    const jobs = [...new Set(items.map((i) => i.job))];
    const usefulTokens = items.reduce((n, i) => n + i.tokens, 0);
    for (const job of jobs) job.trace.batchStarted(startedAtMs);
    const batchSpan = startBatchSpan(
      jobs.map((j) => j.trace),
      startedAtMs,
      { [Attr.MODEL]: this.spec.id, [Attr.BATCH_ITEMS]: items.length, [Attr.BATCH_JOBS]: jobs.length, [Attr.BATCH_TOKENS]: usefulTokens, [Attr.BATCH_CLOSE_REASON]: reason },
    );
    // Interactive texts run (and their jobs finish) before the batch lane's share of the batch.
    const phases = [items.filter((i) => i.lane === "interactive"), items.filter((i) => i.lane === "batch")].filter((p) => p.length > 0);
    let paddedTokens = 0;
    let inferenceMs = 0;
    let calls = 0;
    try {
      for (const phase of phases) {
        const out = await this.runPhase(phase, startedAtMs, items.length, batchSpan.spanContext());
        paddedTokens += out.paddedTokens;
        inferenceMs += out.inferenceMs;
        calls += out.calls;
      }
      batchSpan.setAttributes({ [Attr.BATCH_PADDED_TOKENS]: paddedTokens, [Attr.BATCH_CALLS]: calls });
      batchSpan.end();
      this.opts.onBatch?.({ model: this.spec.id, reason, items: items.length, usefulTokens, paddedTokens, calls, inferenceMs });
      this.stats.batches += 1;
      this.stats.itemsComputed += items.length;
      this.stats.usefulTokens += usefulTokens;
      this.stats.paddedTokens += paddedTokens;
      this.logger.debug({ model: this.spec.id, items: items.length, calls, reason, ms: inferenceMs }, "batch done");
    } catch (err) {
      batchSpan.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      batchSpan.end();
      this.logger.error({ err, model: this.spec.id, items: items.length }, "batch failed");
      for (const item of items) item.job.fail(JobStatus.INTERNAL, `inference failed: ${(err as Error).message}`);
    }
  }

  /** Runs some of a batch's texts in one pool call (sorted and split by the padding plan). */
  private async runPhase(
    items: EmbedItem[],
    batchStartedAtMs: number,
    batchItems: number,
    batch: SpanContext,
  ): Promise<{ paddedTokens: number; inferenceMs: number; calls: number }> {
    // fixed-window runs one padded call, as classic dynamic batchers do; token-budget sorts by
    // length and splits where padding would cost more than another call.
    const groups =
      this.opts.batching.policy === "fixed-window"
        ? [items.map((_, i) => i)]
        : planSubBatches(
            items.map((i) => i.tokens),
            { perCallOverheadTokens: this.opts.perCallOverheadTokens, maxItemsPerCall: this.opts.batching.maxBatchItems },
          );
    const startedAtMs = performance.now();
    const out = await this.pool.run(groups.map((g) => ({ ids: g.map((i) => items[i]!.ids) })));
    const endedAtMs = performance.now();
    const usefulTokens = items.reduce((n, i) => n + i.tokens, 0);
    for (const job of new Set(items.map((i) => i.job))) {
      job.trace.inference(batch, startedAtMs, endedAtMs, {
        [Attr.BATCH_ITEMS]: batchItems,
        [Attr.BATCH_TOKENS]: usefulTokens,
        [Attr.BATCH_PADDED_TOKENS]: out.paddedTokens,
      });
    }
    const dims = this.spec.dimensions;
    const report = { startedAtMs: batchStartedAtMs, inferenceMs: out.inferenceMs, items: batchItems, paddedTokens: out.paddedTokens };
    let row = 0;
    for (const group of groups) {
      for (const i of group) {
        const item = items[i]!;
        item.job.accept(item.index, out.vectors.subarray(row * dims, (row + 1) * dims), report);
        row += 1;
      }
    }
    return { paddedTokens: out.paddedTokens, inferenceMs: out.inferenceMs, calls: groups.length };
  }
}
