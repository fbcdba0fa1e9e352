import { create } from "@bufbuild/protobuf";
import {
  createKafka,
  cancelTopic,
  createKafkaProbe,
  deadLetterTopic,
  decodeEnvelope,
  encodeEnvelope,
  ensureTopics,
  jobsTopic,
  loadCatalog,
  poolTopicSpecs,
  RecordDecodeError,
  retryTopic,
  statusTopicSpec,
  type Catalog,
  type CatalogModel,
  type Logger,
} from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ResidencyState } from "@shoal/gen/shoal/v1/model_pb.ts";
import { JobResultSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { systemClock } from "./batching/clock.ts";
import { CooperativeQueue } from "./tasks/cooperative-queue.ts";
import { ComputeGate } from "./batching/compute-gate.ts";
import type { WorkerConfig } from "./config.ts";
import { createCancelConsumer } from "./queue/cancel-consumer.ts";
import { CancelSet } from "./queue/cancel-set.ts";
import { createJobConsumer, type PulledRecord } from "./queue/job-consumer.ts";
import { createResultSink } from "./queue/result-sink.ts";
import { createRetryRouter } from "./queue/retry-router.ts";
import { ModelTooLargeError } from "./residency/errors.ts";
import type { Lease } from "./residency/residency.ts";
import { createModelFleet, type ModelFleet } from "./tasks/model-fleet.ts";
import type { ModelRunner, ModelRunnerOptions } from "./tasks/model-runner.ts";
import { JobTrace } from "./telemetry/job-trace.ts";
import { createStatusPublisher, type StatusPublisher } from "./telemetry/status-publisher.ts";
import { createWorkerHttp } from "./telemetry/worker-http.ts";
import { createWorkerMetrics } from "./telemetry/worker-metrics.ts";

export interface WorkerApp {
  start(): Promise<void>;
  /** Idempotent graceful stop: stop fetching, finish in-flight jobs, commit, leave the group. */
  stop(): Promise<void>;
  /** The pool's models on this worker (undefined before start). */
  readonly fleet: ModelFleet | undefined;
}

interface InFlight {
  /** Completion callbacks of every delivery of this job (redeliveries attach here). */
  readonly completions: Array<() => void>;
  readonly trace: JobTrace;
  /** Where the record came from: `topic/partition@offset`. */
  readonly source: string;
  /** Holds the job's model resident until the job is answered. */
  lease?: Lease<ModelRunner>;
}

/** How a model's state on this worker reads in the cluster status. */
const residencyStates: Record<string, ResidencyState> = {
  queued: ResidencyState.QUEUED,
  loading: ResidencyState.LOADING,
  resident: ResidencyState.RESIDENT,
  failed: ResidencyState.FAILED,
  unloading: ResidencyState.EVICTED,
  evicted: ResidencyState.EVICTED,
};

/** The worker's composition root. */
export function createWorkerApp(config: WorkerConfig, logger: Logger): WorkerApp {
  const log = logger.child({ component: "app", worker: config.workerId });
  const kafka = createKafka(config.kafka, logger);
  const admin = kafka.admin();
  const sink = createResultSink(kafka, logger, config.workerId);
  const router = createRetryRouter(kafka, logger, { pool: config.pool, workerId: config.workerId, maxAttempts: config.maxAttempts });
  /**
   * Jobs being handled, by {@link attemptKey}: a redelivery of the same record joins its entry
   * (answered once), while the job's next attempt from the retry topic is a job of its own — it
   * may arrive before the attempt that wrote it has let go of its entry.
   */
  const inFlight = new Map<string, InFlight>();
  const attemptKey = (envelope: JobEnvelope): string => `${envelope.jobId}#${Math.max(1, envelope.attempt)}`;
  const metrics = createWorkerMetrics(() => consumer?.inFlight ?? 0);
  const probe = createKafkaProbe(admin, {
    intervalMs: 1_000,
    timeoutMs: 2_000,
    onChange: (reachable) => log.warn({ reachable }, reachable ? "Kafka reachable again" : "Kafka unreachable"),
  });
  let preloaded = false;
  const http = createWorkerHttp(metrics.registry, () => {
    if (!preloaded) return { ready: false, reason: "loading start-up models" };
    if (!consumer?.joined) return { ready: false, reason: "not in the consumer group" };
    if (!probe.reachable) return { ready: false, reason: "Kafka unreachable" };
    if (stopping) return { ready: false, reason: "draining" };
    return { ready: true, reason: `${fleet?.residency.snapshot().filter((m) => m.state === "resident").length ?? 0} model(s) resident, group joined` };
  });
  const groupId = `shoal-pool-${config.pool}`;
  const cancels = new CancelSet(100_000, 10 * 60_000);
  const cancelConsumer = createCancelConsumer(kafka, logger, { topic: cancelTopic(config.pool), workerId: config.workerId, cancels });
  // Inference capacity shared by every resident model: interactive runs first, then round-robin
  // across models.
  const gate = new ComputeGate(config.inferenceThreads, { interactiveReserve: config.interactiveReserve });
  const tokenizeQueue = new CooperativeQueue();
  const startedUnixMs = Date.now();
  let catalog: Catalog | undefined;
  let fleet: ModelFleet | undefined;
  let status: StatusPublisher | undefined;
  let consumer: ReturnType<typeof createJobConsumer> | undefined;
  let stopping: Promise<void> | undefined;
  let waitingForLoad = 0;

  /**
   * A job ended. A failed run (INTERNAL) goes round again through the retry topic while it has
   * attempts left, then to the dead-letter topic; anything else is answered.
   */
  function finish(envelope: JobEnvelope, result: JobResult): void {
    const entry = inFlight.get(attemptKey(envelope));
    // The model may leave once the job's rows are computed; producing the reply does not need it.
    entry?.lease?.release();
    if (result.status === JobStatus.INTERNAL && entry && stopping === undefined) void retryOrDeadLetter(envelope, entry, result);
    else answer(envelope, result);
  }

  async function retryOrDeadLetter(envelope: JobEnvelope, entry: InFlight, result: JobResult): Promise<void> {
    const attempt = Math.max(1, envelope.attempt);
    const labels = { model: envelope.model };
    if (router.retriable(attempt)) {
      try {
        await router.retry(envelope, result.message);
      } catch (err) {
        // Not on the retry topic: leave the offset uncommitted, the job is redelivered.
        inFlight.delete(attemptKey(envelope));
        entry.trace.end("REDELIVER", true);
        log.warn({ err, jobId: envelope.jobId }, "could not write the job to the retry topic; it will be redelivered");
        return;
      }
      metrics.retries.inc(labels);
      log.warn({ jobId: envelope.jobId, model: envelope.model, attempt, reason: result.message }, "job failed; retrying through the retry topic");
      inFlight.delete(attemptKey(envelope));
      entry.trace.end("RETRY", true);
      for (const complete of entry.completions) complete();
      return;
    }
    const dead = deadLetterTopic(config.pool);
    try {
      const value = encodeEnvelope(envelope);
      await router.deadLetter(Buffer.from(value.buffer, value.byteOffset, value.byteLength), result.message, {
        attempts: attempt,
        model: envelope.model,
        source: entry.source,
        key: envelope.jobId,
      });
      metrics.deadLetters.inc({ reason: "failed" });
      log.error({ jobId: envelope.jobId, model: envelope.model, attempts: attempt, reason: result.message }, "job failed every attempt; moved to the dead-letter topic");
    } catch (err) {
      log.error({ err, jobId: envelope.jobId }, "could not write the job to the dead-letter topic");
    }
    answer(
      envelope,
      create(JobResultSchema, {
        jobId: envelope.jobId,
        status: JobStatus.INTERNAL,
        attempt,
        message: `the job failed ${attempt} time(s) and was moved to the dead-letter topic ${dead}: ${result.message}`,
      }),
    );
  }

  /** Produces the result, then releases every delivery of the job (offsets become committable). */
  function answer(envelope: JobEnvelope, result: JobResult): void {
    const replyTo = envelope.replyTo!;
    const entry = inFlight.get(attemptKey(envelope));
    const status = JobStatus[result.status];
    metrics.jobs.inc({ model: envelope.model, status });
    const reply = entry?.trace.replyPublish(replyTo.topic);
    sink.send(replyTo.topic, replyTo.partition, result, reply?.headers).then(
      () => {
        reply?.span.end();
        inFlight.delete(attemptKey(envelope));
        entry?.trace.end(status, result.status !== JobStatus.OK);
        for (const complete of entry?.completions ?? []) complete();
      },
      (err: unknown) => {
        // Stopping: leave the offset uncommitted so the job is redelivered.
        reply?.span.end();
        inFlight.delete(attemptKey(envelope));
        entry?.trace.end("REDELIVER", true);
        log.warn({ err, jobId: envelope.jobId }, "result not produced; job will be redelivered");
      },
    );
  }

  function reject(envelope: JobEnvelope, status: JobStatus, message: string): void {
    finish(envelope, create(JobResultSchema, { jobId: envelope.jobId, status, message, attempt: envelope.attempt }));
  }

  /** Why a job may not start now (it left, or its deadline passed), or undefined. */
  function skipReason(envelope: JobEnvelope, when: string): [JobStatus, string] | undefined {
    if (cancels.has(envelope.jobId)) return [JobStatus.CANCELLED, `the caller left ${when}; nothing was computed`];
    if (envelope.deadlineUnixMs > 0n && Date.now() >= Number(envelope.deadlineUnixMs)) {
      return [JobStatus.DEADLINE_EXCEEDED, `deadline passed ${when}; nothing was computed`];
    }
    return undefined;
  }

  function run(envelope: JobEnvelope, entry: InFlight, lease: Lease<ModelRunner>): void {
    entry.lease = lease;
    lease.resource.submit(envelope, entry.trace, (result) => finish(envelope, result), systemClock.now());
  }

  function onRecord(record: PulledRecord): void {
    let envelope: JobEnvelope;
    try {
      envelope = decodeEnvelope(record.value);
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      metrics.recordsRejected.inc();
      log.warn(
        { err, topic: record.topic, partition: record.partition, offset: record.offset, deadLetterTopic: deadLetterTopic(config.pool) },
        "rejected undecodable job record",
      );
      // Nobody can be answered (no usable reply topic); the record is kept for an operator.
      router
        .deadLetter(record.value, err.message, { attempts: 0, source: `${record.topic}/${record.partition}@${record.offset}` })
        .then(
          () => metrics.deadLetters.inc({ reason: "undecodable" }),
          (e: unknown) => log.error({ err: e, offset: record.offset }, "could not write an undecodable record to the dead-letter topic"),
        )
        .finally(record.complete);
      return;
    }
    const existing = inFlight.get(attemptKey(envelope));
    if (existing) {
      // A redelivery (rebalance) of a job this worker is already computing: answer once.
      existing.completions.push(record.complete);
      return;
    }
    const trace = new JobTrace(record, envelope.jobId, envelope.model, groupId, config.workerId);
    const entry: InFlight = { completions: [record.complete], trace, source: `${record.topic}/${record.partition}@${record.offset}` };
    inFlight.set(attemptKey(envelope), entry);
    const skip = skipReason(envelope, "before the job was pulled");
    if (skip) return reject(envelope, ...skip);
    const model = catalog!.models.get(envelope.model);
    if (!model || model.pool !== config.pool) {
      return reject(envelope, JobStatus.NOT_FOUND, `model '${envelope.model}' is not served by pool '${config.pool}'`);
    }
    const lease = fleet!.tryAcquire(model.id);
    if (lease) return run(envelope, entry, lease);
    // Not resident: this job waits for the load; jobs of resident models keep flowing meanwhile.
    metrics.jobsWaitingForLoad.set(++waitingForLoad);
    fleet!.acquire(model.id).then(
      (loaded) => {
        metrics.jobsWaitingForLoad.set(--waitingForLoad);
        const late = skipReason(envelope, "while its model loaded");
        if (late) {
          loaded.release();
          return reject(envelope, ...late);
        }
        run(envelope, entry, loaded);
      },
      (err: unknown) => {
        metrics.jobsWaitingForLoad.set(--waitingForLoad);
        if (err instanceof ModelTooLargeError) return reject(envelope, JobStatus.RESOURCE_EXHAUSTED, err.message);
        reject(envelope, JobStatus.UNAVAILABLE, `model '${model.id}' could not be loaded on worker ${config.workerId}: ${String((err as Error).message)}`);
      },
    );
  }

  function runnerOptions(model: CatalogModel): ModelRunnerOptions {
    return {
      batching: {
        policy: model.batching.policy ?? config.batchPolicy,
        maxBatchTokens: model.batching.maxBatchTokens ?? config.batchMaxTokens,
        maxBatchItems: model.batching.maxBatchItems ?? config.batchMaxItems,
        maxWaitMs: model.batching.maxWaitMs ?? config.batchMaxWaitMs,
        concurrency: config.inferenceThreads,
        interactiveSlots: config.interactiveThreads,
        batchLaneShare: config.batchLaneSharePercent / 100,
        batchLaneAgingMs: config.batchLaneAgingMs,
      },
      perCallOverheadTokens: config.perCallOverheadTokens,
      isCancelled: (jobId) => cancels.has(jobId),
      gate,
      tokenizeQueue,
      batchLaneCallTokens: config.batchLaneCallTokens,
      onBatch(b) {
        const labels = { model: b.model };
        metrics.batches.inc({ model: b.model, reason: b.reason });
        metrics.batchItems.observe(labels, b.items);
        metrics.batchTokens.observe(labels, b.usefulTokens);
        metrics.batchPadding.observe(labels, b.paddedTokens > 0 ? 1 - b.usefulTokens / b.paddedTokens : 0);
        metrics.batchFill.observe(labels, Math.min(1, b.usefulTokens / (model.batching.maxBatchTokens ?? config.batchMaxTokens)));
        metrics.inferenceSeconds.observe(labels, b.inferenceMs / 1000);
        metrics.tokens.inc(labels, b.usefulTokens);
        metrics.paddedTokens.inc(labels, b.paddedTokens);
        metrics.itemsComputed.inc(labels, b.items);
      },
    };
  }

  function statusSnapshot() {
    const residency = fleet?.residency;
    return {
      workerId: config.workerId,
      pool: config.pool,
      startedUnixMs: BigInt(startedUnixMs),
      provider: config.executionProvider,
      memoryBudgetBytes: BigInt(config.memoryBudgetBytes),
      memoryUsedBytes: BigInt(residency?.usedBytes ?? 0),
      inFlightJobs: consumer?.inFlight ?? 0,
      thrashEvents: BigInt(residency?.thrashEvents ?? 0),
      residencyPolicy: config.residencyPolicy,
      draining: stopping !== undefined,
      models: (residency?.snapshot() ?? []).flatMap((m) =>
        residencyStates[m.state] === undefined
          ? []
          : [
              {
                model: m.model,
                state: residencyStates[m.state] ?? ResidencyState.UNSPECIFIED,
                memoryBytes: BigInt(m.bytes),
                loadCount: BigInt(m.loadCount),
                evictionCount: BigInt(m.evictionCount),
                lastColdStartMs: m.lastColdStartMs ?? 0,
                lastUsedUnixMs: BigInt(Math.round(m.lastUsedMs === undefined ? 0 : startedUnixMs + m.lastUsedMs - startedMonoMs)),
                pinned: m.pinned,
                inFlightJobs: m.inFlight,
                error: m.error ?? "",
              },
            ],
      ),
    };
  }
  const startedMonoMs = systemClock.now();

  async function start(): Promise<void> {
    const httpPort = await http.listen(config.httpPort, config.httpHost);
    catalog = await loadCatalog(config.catalogPath);
    const pool = catalog.pools.get(config.pool);
    if (!pool) throw new Error(`pool '${config.pool}' is not in the catalog ${catalog.path}`);
    fleet = await createModelFleet({ config, catalog, gate, metrics, clock: systemClock, logger, runnerOptions, onChange: () => status?.changed() });
    await fleet.preload();
    preloaded = true;
    await admin.connect();
    await ensureTopics(admin, [...poolTopicSpecs(pool), statusTopicSpec]);
    await sink.start();
    await router.start();
    await cancelConsumer.start();
    status = createStatusPublisher(kafka, logger, { workerId: config.workerId, intervalMs: config.statusIntervalMs, snapshot: statusSnapshot });
    await status.start();
    consumer = createJobConsumer(kafka, logger, {
      groupId,
      topics: [jobsTopic(pool.name, Lane.INTERACTIVE), jobsTopic(pool.name, Lane.BATCH), retryTopic(pool.name)],
      maxInFlight: config.maxInFlightJobs,
      sessionTimeoutMs: config.sessionTimeoutMs,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      onRecord,
      onLag: (topic, partition, lag) => metrics.consumerLag.set({ topic, partition: String(partition) }, lag),
    });
    await consumer.start();
    probe.start();
    const resident = fleet.residency.snapshot().filter((m) => m.state === "resident").map((m) => m.model);
    log.info(
      { pool: pool.name, resident, budgetBytes: config.memoryBudgetBytes, policy: config.residencyPolicy, httpPort },
      "worker pulling jobs",
    );
  }

  async function shutdown(): Promise<void> {
    consumer?.pause();
    probe.stop();
    status?.changed();
    const deadline = Date.now() + config.drainGraceMs;
    while (inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    log.info({ unfinished: inFlight.size }, "in-flight jobs drained");
    await consumer?.stop();
    await cancelConsumer.stop();
    await status?.stop();
    await router.stop();
    await sink.stop();
    await admin.disconnect();
    await fleet?.close();
    await http.close();
    log.info("worker stopped");
  }

  return {
    get fleet() {
      return fleet;
    },
    start,
    stop() {
      stopping ??= shutdown();
      return stopping;
    },
  };
}
