import { SpanStatusCode, type SpanContext } from "@opentelemetry/api";
import { Attr, laneName, servedLane, type Logger } from "@shoal/common";
import { JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { Batcher, type BatcherOptions, type CloseReason } from "../batching/batcher.ts";
import type { Clock } from "../batching/clock.ts";
import type { ComputeGate } from "../batching/compute-gate.ts";
import { callUnits, type RunForecast } from "../batching/run-forecast.ts";
import type { InferenceThreads, RunGroup } from "../runtime/inference-threads.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { planSubBatches } from "../runtime/padding-plan.ts";
import type { TextTokenizer } from "../runtime/text-tokenizer.ts";
import { startBatchSpan, type JobTrace } from "../telemetry/job-trace.ts";
import { planCalls } from "./call-plan.ts";
import type { CooperativeQueue } from "./cooperative-queue.ts";
import { InvalidJobInputError, jobStatusOf } from "../jobs/job-errors.ts";
import { NO_INPUT_LIMITS, prepareSteps, type InputLimits, type PreparedInputs } from "./task-inputs.ts";
import { TaskJob, type JobSchedule, type TaskItem } from "./task-job.ts";

export interface ModelRunnerOptions {
  readonly batching: BatcherOptions;
  /** Per-call cost of a model run in token-equivalents; trades padding against call count. */
  readonly perCallOverheadTokens: number;
  /** Told about every batch run (metrics). */
  readonly onBatch?: (report: BatchRunReport) => void;
  /** Whether the job's caller left (a cancel arrived): such jobs are not computed. */
  readonly isCancelled?: (jobId: string) => boolean;
  /** The worker's inference capacity shared with the other resident models; none: unshared. */
  readonly gate?: ComputeGate;
  /** With a gate: close a batch only once the gate grants it (default true); false: close, then wait. */
  readonly closeOnGrant?: boolean;
  /** Told when each model call starts and ends (the worker's forecast of when its compute frees up). */
  readonly forecast?: RunForecast;
  /** Most padded tokens per model call of the batch lane (preemption granularity); none: unbounded. */
  readonly batchLaneCallTokens?: number;
  /** Where jobs are tokenized, a slice at a time, interactive ones first (shared by the worker's models). */
  readonly tokenizeQueue: CooperativeQueue;
  /** The worker's own input limits; none: unlimited. */
  readonly inputLimits?: InputLimits;
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

/**
 * Serves one model on this worker, whatever its task: tokenizes each job's inputs on arrival
 * (texts, or query-document pairs), batches inputs across jobs, runs the model in its inference
 * threads, and finishes jobs as their rows (vectors, scores, label logits) arrive.
 */
export class ModelRunner {
  private readonly batcher: Batcher<TaskItem>;
  /** Batch-lane jobs still being tokenized, and who waits for none to be. */
  private preparing = 0;
  private readonly preparedWaiters: Array<() => void> = [];

  constructor(
    readonly spec: ModelSpec,
    private readonly tokenizer: TextTokenizer,
    private readonly threads: InferenceThreads,
    private readonly opts: ModelRunnerOptions,
    clock: Clock,
    private readonly logger: Logger,
  ) {
    const gate = opts.closeOnGrant === false ? undefined : opts.gate;
    // The batch closes once the gate grants the compute, not before: jobs of this model that
    // arrive while another model's batch runs join it rather than paying a call of their own.
    this.batcher = new Batcher<TaskItem>(
      opts.batching,
      clock,
      (items, reason, slot) => this.runBatch(items, reason, slot),
      gate && ((lane) => gate.acquire(spec.id, lane)),
    );
  }

  /**
   * Starts a job. Input problems finish it at once with INVALID_ARGUMENT; otherwise its inputs
   * join the batcher and `onFinish` runs when the last row is in. Every job is tokenized through
   * the worker's cooperative queue, a slice at a time (interactive jobs first), so no job's inputs
   * hold the event loop (and the records, replies and heartbeats behind them) for long.
   */
  submit(envelope: JobEnvelope, trace: JobTrace, onFinish: (result: JobResult) => void, nowMs: number): void {
    this.submitPrepared(envelope, trace, onFinish, nowMs, () => prepareSteps(this.spec, this.tokenizer, envelope, this.opts.inputLimits ?? NO_INPUT_LIMITS));
  }

  /**
   * {@link submit} with the job's inputs prepared by `prepare` (given this model's spec and
   * tokenizer) instead of from its task: how a composite model (a bi-encoder ranker, a zero-shot
   * classifier) runs its texts through this embedder, batched with the embedder's own calls. The
   * rows `prepare`'s shaper gets are this model's (`spec.dimensions` values per input).
   */
  submitPrepared(
    envelope: JobEnvelope,
    trace: JobTrace,
    onFinish: (result: JobResult) => void,
    nowMs: number,
    prepare: (spec: ModelSpec, tokenizer: TextTokenizer) => Generator<void, PreparedInputs, void>,
  ): void {
    const deadlineUnix = Number(envelope.deadlineUnixMs);
    const schedule: JobSchedule = {
      enqueuedAtMs: nowMs,
      lane: laneName(servedLane(envelope.lane)),
      deadlineMs: deadlineUnix > 0 ? nowMs + (deadlineUnix - Date.now()) : Infinity,
    };
    const started = performance.now();
    this.preparing += 1;
    this.opts.tokenizeQueue
      .run(() => prepare(this.spec, this.tokenizer), { urgent: schedule.lane === "interactive" })
      .then(
        (prepared) => this.accept(envelope, trace, onFinish, schedule, prepared, started),
        (err: unknown) => {
          this.logger.error({ err, model: this.spec.id, jobId: envelope.jobId }, "tokenizing a job failed");
          this.accept(
            envelope,
            trace,
            onFinish,
            schedule,
            { ok: false, problem: `inputs could not be tokenized: ${(err as Error).message}`, encoded: [] },
            started,
          );
        },
      )
      .finally(() => {
        this.preparing -= 1;
        if (this.preparing === 0) for (const resolve of this.preparedWaiters.splice(0)) resolve();
      });
  }

  private accept(
    envelope: JobEnvelope,
    trace: JobTrace,
    onFinish: (result: JobResult) => void,
    schedule: JobSchedule,
    prepared: PreparedInputs,
    started: number,
  ): void {
    const ended = performance.now();
    trace.tokenized(
      started,
      ended,
      prepared.encoded.reduce((n, e) => n + e.tokenCount, 0),
    );
    if (!prepared.ok) {
      const job = new TaskJob(envelope, [], this.spec.dimensions, ended - started, schedule, trace, () => ({ case: "embed", value: {} }), onFinish);
      const err = new InvalidJobInputError(prepared.problem);
      job.fail(jobStatusOf(err), err.message);
      return;
    }
    const job = new TaskJob(envelope, prepared.encoded, this.spec.dimensions, ended - started, schedule, trace, prepared.shape, onFinish);
    if (job.items.length === 0) job.finishWithoutRows();
    else this.batcher.push(...job.items);
  }

  /** Releases the model's inference threads (after {@link idle}: queued runs would be rejected). */
  close(): Promise<void> {
    return this.threads.close();
  }

  /** Resolves once every submitted text has been computed or skipped. */
  async idle(): Promise<void> {
    while (this.preparing > 0) await new Promise<void>((resolve) => this.preparedWaiters.push(resolve));
    return this.batcher.idle();
  }

  /** @param slot compute already granted for the batch's first call (the batcher's admission); always given back */
  private async runBatch(batch: TaskItem[], reason: CloseReason, slot?: () => void): Promise<void> {
    const granted = { slot };
    try {
      await this.runAdmitted(batch, reason, granted);
    } finally {
      granted.slot?.();
    }
  }

  private async runAdmitted(batch: TaskItem[], reason: CloseReason, granted: { slot: (() => void) | undefined }): Promise<void> {
    const nowUnix = Date.now();
    // Jobs that finished (failed), were cancelled or expired while queued are not computed.
    const items = batch.filter((item) => {
      if (item.job.done) return false;
      if (this.opts.isCancelled?.(item.job.id)) {
        item.job.fail(JobStatus.CANCELLED, "the caller left before the job ran; nothing was computed");
        return false;
      }
      if (item.job.expired(nowUnix)) {
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
      {
        [Attr.MODEL]: this.spec.id,
        [Attr.BATCH_ITEMS]: items.length,
        [Attr.BATCH_JOBS]: jobs.length,
        [Attr.BATCH_TOKENS]: usefulTokens,
        [Attr.BATCH_CLOSE_REASON]: reason,
      },
    );
    // Interactive texts run (and their jobs finish) before the batch lane's share of the batch.
    // A job on a retry (its first run failed) runs alone: if it is poison, it fails by itself.
    const fresh = items.filter((i) => i.job.envelope.attempt <= 1);
    const retried = [...new Set(items.filter((i) => i.job.envelope.attempt > 1).map((i) => i.job))];
    const phases = [
      fresh.filter((i) => i.lane === "interactive"),
      fresh.filter((i) => i.lane === "batch"),
      ...retried.map((job) => items.filter((i) => i.job === job)),
    ].filter((p) => p.length > 0);
    let paddedTokens = 0;
    let inferenceMs = 0;
    let calls = 0;
    let failure: Error | undefined;
    for (const phase of phases) {
      try {
        const out = await this.runPhase(phase, startedAtMs, items.length, batchSpan.spanContext(), granted);
        paddedTokens += out.paddedTokens;
        inferenceMs += out.inferenceMs;
        calls += out.calls;
      } catch (err) {
        // Only this phase's jobs fail (the worker retries them through the retry topic).
        failure = err as Error;
        this.logger.error({ err, model: this.spec.id, items: phase.length }, "batch phase failed");
        for (const item of phase) item.job.fail(JobStatus.INTERNAL, `inference failed: ${failure.message}`);
      }
    }
    if (failure) batchSpan.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
    batchSpan.setAttributes({ [Attr.BATCH_PADDED_TOKENS]: paddedTokens, [Attr.BATCH_CALLS]: calls });
    batchSpan.end();
    this.opts.onBatch?.({ model: this.spec.id, reason, items: items.length, usefulTokens, paddedTokens, calls, inferenceMs });
    this.logger.debug({ model: this.spec.id, items: items.length, calls, reason, ms: inferenceMs }, "batch done");
  }

  /**
   * Runs some of a batch's inputs (one lane, or one retried job): sorted and split by the padding
   * plan, then run call by call through the worker's compute gate. Batch-lane calls are bounded
   * (`batchLaneCallTokens`), so an interactive run waits for at most one of them.
   */
  private async runPhase(
    items: TaskItem[],
    batchStartedAtMs: number,
    batchItems: number,
    batch: SpanContext,
    granted: { slot: (() => void) | undefined },
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
    const lane = items.every((i) => i.lane === "interactive") ? "interactive" : "batch";
    const cap = lane === "batch" ? (this.opts.batchLaneCallTokens ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
    const calls = planCalls(
      groups,
      items.map((i) => i.tokens),
      cap,
    );
    const dims = this.spec.dimensions;
    let paddedTokens = 0;
    let inferenceMs = 0;
    for (const call of calls) {
      const slot = granted.slot;
      granted.slot = undefined;
      const release = slot ?? (await this.opts.gate?.acquire(this.spec.id, lane));
      const startedAtMs = performance.now();
      const ended = this.opts.forecast?.begin(
        callUnits(
          call.map((g) => g.map((i) => items[i]!.tokens)),
          this.opts.perCallOverheadTokens,
        ),
      );
      const out = await this.threads.run(call.map((g) => this.runGroup(g.map((i) => items[i]!)))).finally(() => {
        ended?.();
        release?.();
      });
      const endedAtMs = performance.now();
      paddedTokens += out.paddedTokens;
      inferenceMs += out.inferenceMs;
      const members = call.flat().map((i) => items[i]!);
      const usefulTokens = members.reduce((n, i) => n + i.tokens, 0);
      for (const job of new Set(members.map((i) => i.job))) {
        job.trace.inference(batch, startedAtMs, endedAtMs, {
          [Attr.BATCH_ITEMS]: batchItems,
          [Attr.BATCH_TOKENS]: usefulTokens,
          [Attr.BATCH_PADDED_TOKENS]: out.paddedTokens,
        });
      }
      const report = { startedAtMs: batchStartedAtMs, inferenceMs, items: batchItems, paddedTokens };
      members.forEach((item, row) => {
        item.job.accept(item.index, out.vectors.subarray(row * dims, (row + 1) * dims), report);
      });
    }
    return { paddedTokens, inferenceMs, calls: calls.reduce((n, c) => n + c.length, 0) };
  }

  /** One padded group as the inference threads take it. Pairs (rerank) carry token types; single texts leave them to the thread (all 0). */
  private runGroup(members: readonly TaskItem[]): RunGroup {
    return members.some((m) => m.typeIds !== undefined)
      ? { ids: members.map((m) => m.ids), typeIds: members.map((m) => m.typeIds ?? new Uint8Array(m.ids.length)) }
      : { ids: members.map((m) => m.ids) };
  }
}
