import type { Logger } from "@shoal/common";
import { JobStatus, type EmbedTask, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { Batcher, type BatcherOptions, type CloseReason } from "../batching/batcher.ts";
import type { Clock } from "../batching/clock.ts";
import { InputTooLongError } from "../runtime/errors.ts";
import type { InferencePool } from "../runtime/inference-pool.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { planSubBatches } from "../runtime/padding-plan.ts";
import type { EncodedText, TextTokenizer } from "../runtime/text-tokenizer.ts";
import { EmbedJob, type EmbedItem } from "./embed-job.ts";

export interface EmbedRunnerOptions {
  readonly batching: BatcherOptions;
  /** Per-call cost of a model run in token-equivalents; trades padding against call count. */
  readonly perCallOverheadTokens: number;
}

/** Counters a runner keeps for tests, metrics and benchmarks. */
export interface RunnerStats {
  batches: number;
  itemsComputed: number;
  usefulTokens: number;
  paddedTokens: number;
  jobsExpiredBeforeCompute: number;
}

/**
 * Serves one embedding model on this worker: tokenizes each job's texts on arrival, batches texts
 * across jobs, runs the model in its inference threads, and finishes jobs as their vectors arrive.
 */
export class EmbedRunner {
  private readonly batcher: Batcher<EmbedItem>;
  readonly stats: RunnerStats = { batches: 0, itemsComputed: 0, usefulTokens: 0, paddedTokens: 0, jobsExpiredBeforeCompute: 0 };

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
  submit(envelope: JobEnvelope, task: EmbedTask, onFinish: (result: JobResult) => void, nowMs: number): EmbedJob {
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
    const tokenizeMs = performance.now() - started;
    const job = new EmbedJob(envelope, task, encoded, this.spec.dimensions, tokenizeMs, nowMs, onFinish);
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
    // Jobs that finished (failed) or expired while queued are not computed.
    const items = batch.filter((item) => {
      if (item.job.done) return false;
      if (item.job.expired(nowUnix)) {
        this.stats.jobsExpiredBeforeCompute += 1;
        item.job.fail(JobStatus.DEADLINE_EXCEEDED, "deadline passed before the job ran; nothing was computed");
        return false;
      }
      return true;
    });
    if (items.length === 0) return;
    const groups = planSubBatches(
      items.map((i) => i.tokens),
      { perCallOverheadTokens: this.opts.perCallOverheadTokens, maxItemsPerCall: this.opts.batching.maxBatchItems },
    );
    const startedAtMs = performance.now();
    try {
      const out = await this.pool.run(groups.map((g) => ({ ids: g.map((i) => items[i]!.ids) })));
      const dims = this.spec.dimensions;
      const report = { startedAtMs, inferenceMs: out.inferenceMs, items: items.length, paddedTokens: out.paddedTokens };
      let row = 0;
      for (const group of groups) {
        for (const i of group) {
          const item = items[i]!;
          item.job.accept(item.index, out.vectors.subarray(row * dims, (row + 1) * dims), report);
          row += 1;
        }
      }
      this.stats.batches += 1;
      this.stats.itemsComputed += items.length;
      this.stats.usefulTokens += items.reduce((n, i) => n + i.tokens, 0);
      this.stats.paddedTokens += out.paddedTokens;
      this.logger.debug({ model: this.spec.id, items: items.length, groups: groups.length, reason, ms: out.inferenceMs }, "batch done");
    } catch (err) {
      this.logger.error({ err, model: this.spec.id, items: items.length }, "batch failed");
      for (const item of items) item.job.fail(JobStatus.INTERNAL, `inference failed: ${(err as Error).message}`);
    }
  }
}
