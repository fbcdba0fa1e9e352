import { create } from "@bufbuild/protobuf";
import {
  deadLetterTopic,
  decodeEnvelope,
  encodeEnvelope,
  laneName,
  RecordDecodeError,
  servedLane,
  SIGNATURE_HEADER,
  WAKE_HEADER,
  type CatalogModel,
  type LaneName,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
import { JobResultSchema, JobStatus, type JobEnvelope, type JobResult, type JobTimings } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { Delivery, IntakeHandler, Settlement } from "../intake/intake.ts";
import type { ResultSink } from "../queue/result-sink.ts";
import type { RetryRouter } from "../queue/retry-router.ts";
import type { Lease } from "../residency/residency.ts";
import type { ModelRunner } from "../tasks/model-runner.ts";
import { JobTrace } from "../telemetry/job-trace.ts";
import type { WorkerMetrics } from "../telemetry/worker-metrics.ts";
import { estimateJobTokens } from "./token-estimate.ts";
import { JobCancelledError, JobExpiredError, jobStatusOf, ModelNotServedError, ModelUnavailableError } from "./job-errors.ts";
import { loadGiveBack } from "./load-give-back.ts";

/** What computes a job: a resident model's runner. */
export type JobRunner = Pick<ModelRunner, "submit">;

/** The worker's models as the lifecycle sees them: leases that hold a model resident. */
export interface JobFleet {
  /** A lease at once when the model is resident, else undefined. */
  tryAcquire(model: string): Lease<JobRunner> | undefined;
  /** Loads the model if needed; rejects with the load's error. */
  acquire(model: string): Promise<Lease<JobRunner>>;
  /** The model's last load here failed: its error and ms until it is tried again (a backoff); undefined when it did not fail. */
  loadFailure?(model: string): { readonly error: Error; readonly retryInMs: number } | undefined;
}

export interface JobLifecycleDeps {
  readonly pool: string;
  readonly workerId: string;
  /** Names the consumer group in job spans. */
  readonly groupId: string;
  /** Most jobs held at once (taken and not settled). */
  readonly maxInFlight: number;
  /**
   * Most record bytes held at once (taken and not settled; default: no limit besides the count):
   * 1,024 jobs of 8 MiB each would be 8 GiB, so the count alone does not bound memory.
   */
  readonly maxInFlightBytes?: number;
  /**
   * When set, {@link JobLifecycle.room} also keeps the estimated tokens of the jobs in hand —
   * computing or waiting to — under this: a busy worker asks for more only while what it holds is
   * small, so a shared queue keeps the rest for the first worker that frees up instead of queueing
   * it behind a long run here. Unset: room is only `maxInFlight` (a consumer group, which owns its
   * partitions' jobs whatever it holds).
   */
  readonly prefetchTokens?: number;
  /**
   * With a prefetch budget: estimated tokens a worker holding nothing takes at once (a batch's
   * worth, so batches still form from a backlog). Default: `prefetchTokens`.
   */
  readonly idleTakeTokens?: number;
  /**
   * With a prefetch budget: a call's fixed cost in token-equivalents (the padding planner's
   * `SHOAL_PER_CALL_OVERHEAD_TOKENS`, default 0). Work in hand counts one call per model held, so
   * on hardware where a call costs far more than its tokens (a GPU) a busy worker takes no job it
   * would run a call later than an idle worker could.
   */
  readonly perCallOverheadTokens?: number;
  /**
   * With a prefetch budget: a busy worker whose work in hand is predicted to be done within this
   * many milliseconds (`msToDrain`) takes what an idle worker would (`idleTakeTokens`), so its
   * next jobs arrive as the device frees instead of a queue round trip after it
   * (SHOAL_TAKE_AHEAD_MS: about the round trip). 0 or unset: off. A function: the lead as it is
   * now (undefined: not known yet, no take-ahead).
   */
  readonly takeAheadMs?: number | (() => number | undefined);
  /** A batch's token budget (SHOAL_BATCH_MAX_TOKENS): the take-ahead counts a call per batch of a model's waiting jobs. Unset: one call per model. */
  readonly batchMaxTokens?: number;
  /**
   * Milliseconds until the calls in progress end and then `waitingUnits` token-equivalents more
   * have run (RunForecast.msToDrain); undefined: not known yet.
   */
  readonly msToDrain?: (waitingUnits: number) => number | undefined;
  /**
   * A simulated network between the broker and this worker (`SHOAL_SIM_FETCH_DELAY_MS`, simulated
   * runtimes only, for benchmarks): a job taken is held and counted at once (room, `msToDrain`, so
   * the share intake's take-ahead and keep rule see it, as a worker on a slow network sees a job
   * by the time it decides), but runs only this many ms later, when it would have arrived. A dilated
   * benchmark stretches the devices' time but not Kafka's; this puts Kafka's latency back on the
   * devices' clock. Unset or 0: none.
   */
  readonly arrivalDelayMs?: number;
  /**
   * Deliveries after which a job is no longer run but dead-lettered (a job that kept its worker
   * from answering: crashes, lost locks). Unset: no limit (the intake cannot count deliveries).
   */
  readonly maxDeliveries?: number;
  /** Whether a released job is offered again at once, possibly to another worker (a share group). */
  readonly releaseRedelivers?: boolean;
  /** The catalog's model by id. */
  readonly model: (id: string) => CatalogModel | undefined;
  /**
   * A job names a model (or a revision) not served here now: the registry may be behind the gateway
   * that wrote it. Resolves with the model once served (at once with the one served now when the job's
   * revision is one seen replaced here), or undefined after a short wait (NOT_FOUND). Unset: no wait.
   */
  readonly awaitModel?: (id: string, revision: string) => Promise<CatalogModel | undefined>;
  readonly fleet: JobFleet;
  readonly results: Pick<ResultSink, "send">;
  readonly retries: Pick<RetryRouter, "retriable" | "retry" | "deadLetter">;
  readonly cancels: { has(jobId: string): boolean };
  readonly metrics: Pick<WorkerMetrics, "jobs" | "retries" | "deadLetters" | "recordsRejected" | "jobsWaitingForLoad" | "jobWaitSeconds">;
  /** Checks each job record's signature (SHOAL_CLUSTER_KEYS); unsigned or forged ones are never run. */
  readonly signer?: RecordSigner;
  readonly logger: Logger;
  /** Monotonic milliseconds handed to the runner (the batcher's clock). */
  readonly monotonicNow: () => number;
  /** Wall-clock unix milliseconds, for deadlines. */
  readonly unixNow?: () => number;
}

/**
 * One job's life on a worker, from the moment its record is delivered until it is settled:
 *
 *   delivered ─▶ decoded ─▶ skipped? (cancelled, expired, model not served) ─▶ answered
 *                      └─▶ model leased (loaded if needed) ─▶ run ─▶ answered
 *                                                             └─ failed ─▶ retry topic ─▶ … ─▶ dead letter + answered
 *
 * A record is settled only after its outcome is durable: the result on the reply topic, the next
 * attempt on the retry topic, or the job on the dead-letter topic (at-least-once, nothing
 * accepted is lost). A redelivery of a job attempt already in hand joins it and is settled with
 * it, so a job is answered once per attempt.
 */
export interface JobLifecycle extends IntakeHandler {
  /** Jobs taken and not yet settled. */
  readonly size: number;
  /** Record bytes of the jobs taken and not yet settled. */
  readonly heldBytes: number;
  /** Estimated tokens of the jobs in hand not yet computed (both lanes): the load routed dispatch reads. */
  readonly pendingTokens: number;
  /** Predicted ms until the work in hand is done (the take-ahead's forecast): 0 when idle, undefined when not known. */
  msToDrain(): number | undefined;
  /**
   * Waits until every job has settled or `graceMs` passed; from now on a failed job is answered
   * as it is rather than sent round the retry topic. Resolves with the jobs left unsettled.
   */
  drain(graceMs: number): Promise<number>;
  /**
   * Gives up the jobs still in hand (the drain grace ran out): from now on a job that ends is
   * given back (`release`) instead of answered. Returns their job ids, so the worker can skip
   * computing them; the intake hands them to other workers.
   */
  abandon(): string[];
}

interface InFlight {
  /** Every delivery of this job attempt (redeliveries attach here); all settle together. */
  readonly deliveries: Delivery[];
  readonly trace: JobTrace;
  /** Where the first delivery came from: `topic/partition@offset`. */
  readonly source: string;
  /** Holds the job's model resident until the job's rows are computed. */
  lease?: Lease<JobRunner>;
  /** Estimated tokens while the job waits to compute; 0 once its first batch started. */
  waitingTokens: number;
  /** Estimated tokens until the job is computed (waiting or computing). */
  heldTokens: number;
  readonly lane: LaneName;
  readonly model: string;
  /** Bytes of the job's record. */
  readonly bytes: number;
  /** Whether the job counts in `heldModels`. */
  counted: boolean;
  /** Wall clock when this worker took the job off the queue (splits `queue_ms`: Kafka, then here). */
  readonly takenUnixMs: number;
}

const sourceOf = (d: Delivery): string => `${d.topic}/${d.partition}@${d.offset}`;

/** Creates the job lifecycle; hand it to an intake as its handler. */
export function createJobLifecycle(deps: JobLifecycleDeps): JobLifecycle {
  const { metrics, retries } = deps;
  const log = deps.logger.child({ component: "jobs" });
  const unixNow = deps.unixNow ?? Date.now;
  /**
   * Jobs in hand by job id and attempt: a redelivery of the same record joins its entry, while the
   * job's next attempt from the retry topic is a job of its own — it may arrive before the attempt
   * that wrote it has let go of its entry.
   */
  const inFlight = new Map<string, InFlight>();
  const keyOf = (envelope: JobEnvelope): string => `${envelope.jobId}#${Math.max(1, envelope.attempt)}`;
  let draining = false;
  let abandoned = false;
  let waitingForLoad = 0;
  /** Estimated tokens of the jobs in hand not yet computed (waiting or computing). */
  /** Per lane: a batch-lane backlog never holds back interactive jobs (the compute gate serves those first). */
  const heldTokens: Record<LaneName, number> = { interactive: 0, batch: 0 };
  /** Running mean of a job's estimated tokens, to turn free tokens into a job count. */
  let meanJobTokens = 64;
  /** Jobs held (not yet computed) per lane and model: each model held is one call more of work in hand. */
  const heldModels: Record<LaneName, Map<string, number>> = { interactive: new Map(), batch: new Map() };
  const overheadTokens = deps.perCallOverheadTokens ?? 0;
  /** Record bytes of the jobs in hand. */
  let heldBytes = 0;
  /** Jobs in hand whose first batch has not started (waiting for a model, tokenizing, batching), per model: how many, their tokens. */
  const waiting = new Map<string, { jobs: number; tokens: number }>();

  function hold(entry: InFlight, tokens: number): void {
    entry.heldTokens = tokens;
    entry.counted = true;
    heldTokens[entry.lane] += tokens;
    const models = heldModels[entry.lane];
    models.set(entry.model, (models.get(entry.model) ?? 0) + 1);
  }

  /** The job is computed or gone: it no longer counts as work in hand. */
  function unhold(entry: InFlight): void {
    if (entry.heldTokens === 0 && !entry.counted) return;
    heldTokens[entry.lane] -= entry.heldTokens;
    entry.heldTokens = 0;
    if (entry.counted) {
      entry.counted = false;
      const models = heldModels[entry.lane];
      const n = (models.get(entry.model) ?? 1) - 1;
      if (n <= 0) models.delete(entry.model);
      else models.set(entry.model, n);
    }
  }

  /** Work in hand in token-equivalents: held tokens plus one call's overhead per model held. */
  function workInHand(lane: LaneName | "all"): number {
    if (lane !== "all") return heldTokens[lane] + overheadTokens * heldModels[lane].size;
    const models = new Set([...heldModels.interactive.keys(), ...heldModels.batch.keys()]);
    return heldTokens.interactive + heldTokens.batch + overheadTokens * models.size;
  }

  function wait(entry: InFlight, tokens: number): void {
    entry.waitingTokens = tokens;
    if (tokens <= 0) return;
    const w = waiting.get(entry.model) ?? { jobs: 0, tokens: 0 };
    w.jobs += 1;
    w.tokens += tokens;
    waiting.set(entry.model, w);
  }

  function started(entry: InFlight): void {
    const w = entry.waitingTokens > 0 ? waiting.get(entry.model) : undefined;
    if (w) {
      w.jobs -= 1;
      w.tokens -= entry.waitingTokens;
      if (w.jobs <= 0) waiting.delete(entry.model);
    }
    entry.waitingTokens = 0;
  }

  /** The waiting jobs' work in token-equivalents: their tokens, plus a call's overhead per batch each model's fill (at least one). */
  function waitingUnits(): number {
    const budget = deps.batchMaxTokens ?? Number.POSITIVE_INFINITY;
    let units = 0;
    for (const w of waiting.values()) units += w.tokens + overheadTokens * Math.max(1, Math.ceil(w.tokens / budget));
    return units;
  }

  /** Predicted ms until the work in hand (the calls running, then the batches waiting) is done: 0 holding nothing, undefined when not known. */
  function msToDrain(): number | undefined {
    if (heldTokens.interactive + heldTokens.batch === 0) return 0;
    return deps.msToDrain?.(waitingUnits());
  }

  /** Whether a busy worker takes its next jobs now: its work in hand is done within the take-ahead. */
  function takesAhead(): boolean {
    const leadMs = typeof deps.takeAheadMs === "function" ? deps.takeAheadMs() : deps.takeAheadMs;
    if (!leadMs) return false;
    const drainMs = msToDrain();
    return drainMs !== undefined && drainMs <= leadMs;
  }

  function settle(envelope: JobEnvelope, outcome: Settlement, traceStatus: string, failed: boolean, restMs?: number): void {
    const entry = inFlight.get(keyOf(envelope));
    if (!entry) return;
    started(entry);
    unhold(entry);
    inFlight.delete(keyOf(envelope));
    heldBytes -= entry.bytes;
    entry.trace.end(traceStatus, failed);
    for (const d of entry.deliveries) d.settle(outcome, restMs);
  }

  /** A job ended. A failed run goes round the retry topic while it has attempts left; anything else is answered. */
  function finish(envelope: JobEnvelope, result: JobResult): void {
    const entry = inFlight.get(keyOf(envelope));
    // The model may leave once the job's rows are computed; producing the reply does not need it.
    entry?.lease?.release();
    if (abandoned) return settle(envelope, "release", "RELEASED", true);
    if (entry && result.timings) splitQueueWait(envelope, entry, result.timings);
    if (result.status === JobStatus.INTERNAL && entry && !draining) void retryOrDeadLetter(envelope, entry, result);
    else answer(envelope, result);
  }

  /**
   * Splits a computed job's queue time (gateway enqueue → batch start) into its wait in Kafka
   * (until this worker took it) and its wait here (model load, tokenizing, batches before it).
   */
  function splitQueueWait(envelope: JobEnvelope, entry: InFlight, timings: JobTimings): void {
    const inKafkaMs = Math.min(timings.queueMs, Math.max(0, entry.takenUnixMs - Number(envelope.enqueuedUnixMs)));
    timings.heldMs = timings.queueMs - inKafkaMs;
    timings.deliveries = entry.deliveries[0]?.deliveryCount ?? 1;
    metrics.jobWaitSeconds.observe({ where: "queue" }, inKafkaMs / 1000);
    metrics.jobWaitSeconds.observe({ where: "worker" }, timings.heldMs / 1000);
  }

  function fail(envelope: JobEnvelope, err: Error): void {
    finish(envelope, create(JobResultSchema, { jobId: envelope.jobId, status: jobStatusOf(err), message: err.message, attempt: envelope.attempt }));
  }

  async function retryOrDeadLetter(envelope: JobEnvelope, entry: InFlight, result: JobResult): Promise<void> {
    const attempt = Math.max(1, envelope.attempt);
    if (retries.retriable(attempt)) {
      try {
        await retries.retry(envelope, result.message);
      } catch (err) {
        log.warn({ err, jobId: envelope.jobId }, "could not write the job to the retry topic; giving it back for redelivery");
        return settle(envelope, "release", "REDELIVER", true);
      }
      metrics.retries.inc({ model: modelLabel(envelope.model) });
      log.warn({ jobId: envelope.jobId, model: envelope.model, attempt, reason: result.message }, "job failed; retrying through the retry topic");
      return settle(envelope, "done", "RETRY", true);
    }
    await deadLetter(envelope, entry, result.message);
  }

  /** Writes the job to the dead-letter topic with its reason, then answers INTERNAL naming it. */
  async function deadLetter(envelope: JobEnvelope, entry: InFlight, reason: string): Promise<void> {
    const attempt = Math.max(1, envelope.attempt);
    const dead = deadLetterTopic(deps.pool);
    try {
      const value = encodeEnvelope(envelope);
      await retries.deadLetter(Buffer.from(value.buffer, value.byteOffset, value.byteLength), reason, {
        attempts: attempt,
        model: envelope.model,
        source: entry.source,
        key: envelope.jobId,
      });
      metrics.deadLetters.inc({ reason: "failed" });
      log.error({ jobId: envelope.jobId, model: envelope.model, attempts: attempt, reason }, "job moved to the dead-letter topic");
    } catch (err) {
      log.error({ err, jobId: envelope.jobId }, "could not write the job to the dead-letter topic");
    }
    answer(
      envelope,
      create(JobResultSchema, {
        jobId: envelope.jobId,
        status: JobStatus.INTERNAL,
        attempt,
        message: `the job failed ${attempt} time(s) and was moved to the dead-letter topic ${dead}: ${reason}`,
      }),
    );
  }

  /** Produces the result, then settles every delivery of the job. */
  function answer(envelope: JobEnvelope, result: JobResult): void {
    const replyTo = envelope.replyTo!;
    const entry = inFlight.get(keyOf(envelope));
    const status = JobStatus[result.status];
    metrics.jobs.inc({ model: modelLabel(envelope.model), status });
    const reply = entry?.trace.replyPublish(replyTo.topic);
    deps.results.send(replyTo.topic, replyTo.partition, result, reply?.headers).then(
      () => {
        reply?.span.end();
        settle(envelope, "done", status, result.status !== JobStatus.OK);
      },
      (err: unknown) => {
        // The sink only gives up when stopping: give the job back to be run again.
        reply?.span.end();
        log.warn({ err, jobId: envelope.jobId }, "result not produced; giving the job back for redelivery");
        settle(envelope, "release", "REDELIVER", true);
      },
    );
  }

  /** Why a job may not start now (its caller left, or its deadline passed), or undefined. */
  function skipReason(envelope: JobEnvelope, when: string): Error | undefined {
    if (deps.cancels.has(envelope.jobId)) return new JobCancelledError(`the caller left ${when}; nothing was computed`);
    if (envelope.deadlineUnixMs > 0n && unixNow() >= Number(envelope.deadlineUnixMs)) {
      return new JobExpiredError(`deadline passed ${when}; nothing was computed`);
    }
    return undefined;
  }

  function run(envelope: JobEnvelope, entry: InFlight, lease: Lease<JobRunner>): void {
    entry.lease = lease;
    lease.resource.submit(
      envelope,
      entry.trace,
      (result) => {
        // Computed: the device is free of it, so it no longer counts against the prefetch budget
        // while its answer is produced and acknowledged.
        unhold(entry);
        finish(envelope, result);
      },
      deps.monotonicNow(),
    );
  }

  /** Not a job at all: kept on the dead-letter topic for an operator; nobody can be answered. */
  function rejectUndecodable(delivery: Delivery, err: RecordDecodeError): void {
    metrics.recordsRejected.inc();
    log.warn(
      { err, topic: delivery.topic, partition: delivery.partition, offset: delivery.offset, deadLetterTopic: deadLetterTopic(deps.pool) },
      "rejected undecodable job record",
    );
    retries
      .deadLetter(delivery.value, err.message, { attempts: 0, source: sourceOf(delivery) })
      .then(
        () => metrics.deadLetters.inc({ reason: "undecodable" }),
        (e: unknown) => log.error({ err: e, offset: delivery.offset }, "could not write an undecodable record to the dead-letter topic"),
      )
      .finally(() => delivery.settle("reject"));
  }

  /** Signed by nobody we trust: not run, not dead-lettered (a forger could fill that topic), counted. */
  function rejectForged(delivery: Delivery): void {
    metrics.recordsRejected.inc();
    log.warn(
      { topic: delivery.topic, partition: delivery.partition, offset: delivery.offset },
      "rejected a job record without a valid signature (SHOAL_CLUSTER_KEYS): not run",
    );
    delivery.settle("reject");
  }

  /** A metric label from a record: a catalog model id, or `other` (labels never take raw record strings). */
  function modelLabel(id: string): string {
    return deps.model(id) === undefined ? "other" : id;
  }

  function deliver(delivery: Delivery): void {
    // A wake-up marker a worker wrote after giving a job back (WAKE_HEADER): nothing to run, so
    // nothing to verify either (whoever writes one only makes a record that is dropped).
    if (delivery.headers?.[WAKE_HEADER] !== undefined) return delivery.settle("done");
    if (deps.signer !== undefined && !deps.signer.verify("job", delivery.value, delivery.headers?.[SIGNATURE_HEADER])) return rejectForged(delivery);
    let envelope: JobEnvelope;
    try {
      envelope = decodeEnvelope(delivery.value);
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      return rejectUndecodable(delivery, err);
    }
    const existing = inFlight.get(keyOf(envelope));
    if (existing) {
      // A redelivery (rebalance, expired lock) of a job attempt in hand: answer once.
      existing.deliveries.push(delivery);
      log.debug(
        { jobId: envelope.jobId, partition: delivery.partition, offset: delivery.offset, deliveryCount: delivery.deliveryCount },
        "job delivered again while in hand",
      );
      return;
    }
    const trace = new JobTrace(delivery, envelope.jobId, envelope.model, deps.groupId, deps.workerId);
    const entry: InFlight = {
      deliveries: [delivery],
      trace,
      source: sourceOf(delivery),
      waitingTokens: 0,
      heldTokens: 0,
      lane: laneName(servedLane(envelope.lane)),
      model: envelope.model,
      bytes: delivery.value?.length ?? 0,
      counted: false,
      takenUnixMs: unixNow(),
    };
    log.debug(
      {
        jobId: envelope.jobId,
        attempt: envelope.attempt,
        partition: delivery.partition,
        offset: delivery.offset,
        deliveryCount: delivery.deliveryCount,
        source: entry.source,
      },
      "job taken",
    );
    trace.onStarted(() => started(entry));
    inFlight.set(keyOf(envelope), entry);
    heldBytes += entry.bytes;
    const skip = skipReason(envelope, "before the job was pulled");
    if (skip) return fail(envelope, skip);
    const model = servedRevision(deps.model(envelope.model), envelope.modelRevision);
    if (model === undefined && deps.awaitModel !== undefined) {
      deps.awaitModel(envelope.model, envelope.modelRevision).then(
        (late) => {
          const skipped = skipReason(envelope, "while the model registry caught up");
          if (skipped) return fail(envelope, skipped);
          accept(envelope, entry, delivery, late);
        },
        (err: unknown) => fail(envelope, err instanceof Error ? err : new Error(String(err))),
      );
      return;
    }
    accept(envelope, entry, delivery, model);
  }

  /** The job's model as this worker serves it, when at the revision the job names (or it names none). */
  function servedRevision(model: CatalogModel | undefined, revision: string): CatalogModel | undefined {
    return model !== undefined && (revision === "" || model.revision === undefined || model.revision === revision) ? model : undefined;
  }

  /** A job whose model is known (or known not to be served here): counted and admitted, or failed NOT_FOUND. */
  function accept(envelope: JobEnvelope, entry: InFlight, delivery: Delivery, model: CatalogModel | undefined): void {
    if (!model || model.pool !== deps.pool) return fail(envelope, new ModelNotServedError(envelope.model, deps.pool));
    if (deps.maxDeliveries !== undefined && delivery.deliveryCount >= deps.maxDeliveries) {
      return void deadLetter(
        envelope,
        entry,
        `delivered ${delivery.deliveryCount} times without an answer (its worker crashed or lost the job's lock each time)`,
      );
    }
    wait(entry, estimateJobTokens(envelope, model.spec.maxSequenceLength));
    hold(entry, entry.waitingTokens);
    meanJobTokens += (entry.waitingTokens - meanJobTokens) / 16;
    // A simulated network: held and counted from now (room, forecast), run once it has arrived.
    if (deps.arrivalDelayMs) setTimeout(() => admit(envelope, entry, model, delivery), deps.arrivalDelayMs);
    else admit(envelope, entry, model, delivery);
  }

  /** A job taken and counted: runs once its model is resident here. */
  function admit(envelope: JobEnvelope, entry: InFlight, model: CatalogModel, delivery: Delivery): void {
    const lease = deps.fleet.tryAcquire(model.id);
    if (lease) return run(envelope, entry, lease);
    // Its last load here failed and waits out a backoff: not tried now; the job goes to another worker.
    const backoff = deps.fleet.loadFailure?.(model.id);
    if (backoff !== undefined && backoff.retryInMs > 0) return cannotLoad(envelope, model, delivery, backoff.error);
    // Not resident: this job waits for the load; jobs of resident models keep flowing meanwhile.
    metrics.jobsWaitingForLoad.set(++waitingForLoad);
    deps.fleet.acquire(model.id).then(
      (loaded) => {
        metrics.jobsWaitingForLoad.set(--waitingForLoad);
        const late = skipReason(envelope, "while its model loaded");
        if (late) {
          loaded.release();
          return fail(envelope, late);
        }
        run(envelope, entry, loaded);
      },
      (err: unknown) => {
        metrics.jobsWaitingForLoad.set(--waitingForLoad);
        // Too large for this worker's budget (RESOURCE_EXHAUSTED) and the like: answered as they are.
        if (err instanceof Error && jobStatusOf(err) !== JobStatus.INTERNAL && !(err instanceof ModelUnavailableError)) return fail(envelope, err);
        cannotLoad(envelope, model, delivery, err);
      },
    );
  }

  /** The job's model cannot load here (memory, a bad disk): given to another worker while one can take it (load-give-back.ts). */
  function cannotLoad(envelope: JobEnvelope, model: CatalogModel, delivery: Delivery, cause: unknown): void {
    const failure = cause instanceof ModelUnavailableError ? cause : new ModelUnavailableError(model.id, deps.workerId, cause);
    const how = loadGiveBack({
      releaseRedelivers: deps.releaseRedelivers ?? false,
      deliveryCount: delivery.deliveryCount,
      maxDeliveries: deps.maxDeliveries,
      retriable: retries.retriable(Math.max(1, envelope.attempt)),
      draining,
    });
    if (how === "fail") return fail(envelope, failure);
    log.warn(
      { jobId: envelope.jobId, model: model.id, deliveryCount: delivery.deliveryCount, err: cause, next: how },
      "model could not be loaded here; giving the job back to the queue",
    );
    if (how === "decline") return settle(envelope, "decline", "RELEASED", true, deps.fleet.loadFailure?.(model.id)?.retryInMs ?? 0);
    // Its last delivery that may run: the next attempt, a record of its own, for another worker.
    retries.retry(envelope, failure.message).then(
      () => {
        metrics.retries.inc({ model: modelLabel(envelope.model) });
        settle(envelope, "done", "RETRY", true);
      },
      (err: unknown) => {
        log.warn({ err, jobId: envelope.jobId }, "could not write the job to the retry topic; answering it Unavailable");
        fail(envelope, failure);
      },
    );
  }

  /** Jobs the worker takes now (IntakeHandler.room). */
  function room(lane?: LaneName): number {
    if (deps.maxInFlightBytes !== undefined && heldBytes >= deps.maxInFlightBytes) return 0;
    const slots = Math.max(0, deps.maxInFlight - inFlight.size);
    if (deps.prefetchTokens === undefined || slots === 0) return slots;
    const all = heldTokens.interactive + heldTokens.batch;
    // Nothing computing or waiting (answers may still be on their way), or only a call about to
    // end (take-ahead): a batch's worth (at least one job, however large).
    if (all === 0 || takesAhead()) return Math.min(slots, Math.max(1, Math.floor((deps.idleTakeTokens ?? deps.prefetchTokens) / meanJobTokens)));
    // Busy: more only while the work in hand, running included, is under the budget.
    const free = deps.prefetchTokens - workInHand(lane === "interactive" ? "interactive" : "all");
    if (free <= 0) return 0;
    return Math.min(slots, Math.max(1, Math.floor(free / meanJobTokens)));
  }

  return {
    deliver,
    room,
    holds(model) {
      return heldModels.interactive.has(model) || heldModels.batch.has(model);
    },
    get size() {
      return inFlight.size;
    },
    get heldBytes() {
      return heldBytes;
    },
    msToDrain,
    get pendingTokens() {
      return heldTokens.interactive + heldTokens.batch;
    },
    async drain(graceMs) {
      draining = true;
      const deadline = unixNow() + graceMs;
      while (inFlight.size > 0 && unixNow() < deadline) await new Promise((r) => setTimeout(r, 20));
      return inFlight.size;
    },
    abandon() {
      abandoned = true;
      return [...inFlight.keys()].map((key) => key.slice(0, key.lastIndexOf("#")));
    },
  };
}
