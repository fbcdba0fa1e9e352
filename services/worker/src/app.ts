import { create } from "@bufbuild/protobuf";
import {
  createKafka,
  cancelTopic,
  createKafkaProbe,
  decodeEnvelope,
  ensureTopics,
  jobsTopic,
  loadCatalog,
  poolTopicSpecs,
  RecordDecodeError,
  type Catalog,
  type Logger,
} from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobResultSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { systemClock } from "./batching/clock.ts";
import type { WorkerConfig } from "./config.ts";
import { createCancelConsumer } from "./queue/cancel-consumer.ts";
import { CancelSet } from "./queue/cancel-set.ts";
import { createJobConsumer, type PulledRecord } from "./queue/job-consumer.ts";
import { createResultSink } from "./queue/result-sink.ts";
import { createInferencePool, type InferencePool } from "./runtime/inference-pool.ts";
import { createTextTokenizer } from "./runtime/text-tokenizer.ts";
import { EmbedRunner } from "./tasks/embed-runner.ts";
import { JobTrace } from "./telemetry/job-trace.ts";
import { createWorkerHttp } from "./telemetry/worker-http.ts";
import { createWorkerMetrics } from "./telemetry/worker-metrics.ts";

export interface WorkerApp {
  start(): Promise<void>;
  /** Idempotent graceful stop: stop fetching, finish in-flight jobs, commit, leave the group. */
  stop(): Promise<void>;
  readonly runners: ReadonlyMap<string, EmbedRunner>;
}

interface InFlight {
  /** Completion callbacks of every delivery of this job (redeliveries attach here). */
  readonly completions: Array<() => void>;
  readonly trace: JobTrace;
}

/** The worker's composition root. */
export function createWorkerApp(config: WorkerConfig, logger: Logger): WorkerApp {
  const log = logger.child({ component: "app", worker: config.workerId });
  const kafka = createKafka(config.kafka, logger);
  const admin = kafka.admin();
  const sink = createResultSink(kafka, logger, config.workerId);
  const runners = new Map<string, EmbedRunner>();
  const pools: InferencePool[] = [];
  const inFlight = new Map<string, InFlight>();
  const metrics = createWorkerMetrics(() => consumer?.inFlight ?? 0);
  const probe = createKafkaProbe(admin, {
    intervalMs: 1_000,
    timeoutMs: 2_000,
    onChange: (reachable) => log.warn({ reachable }, reachable ? "Kafka reachable again" : "Kafka unreachable"),
  });
  const http = createWorkerHttp(metrics.registry, () => {
    if (runners.size === 0) return { ready: false, reason: "models not loaded" };
    if (!consumer?.joined) return { ready: false, reason: "not in the consumer group" };
    if (!probe.reachable) return { ready: false, reason: "Kafka unreachable" };
    if (stopping) return { ready: false, reason: "draining" };
    return { ready: true, reason: `${runners.size} model(s), group joined` };
  });
  const groupId = `shoal-pool-${config.pool}`;
  const cancels = new CancelSet(100_000, 10 * 60_000);
  const cancelConsumer = createCancelConsumer(kafka, logger, { topic: cancelTopic(config.pool), workerId: config.workerId, cancels });
  let consumer: ReturnType<typeof createJobConsumer> | undefined;
  let stopping: Promise<void> | undefined;

  /** Produces the result, then releases every delivery of the job (offsets become committable). */
  function finish(envelope: JobEnvelope, result: JobResult): void {
    const replyTo = envelope.replyTo!;
    const entry = inFlight.get(envelope.jobId);
    const status = JobStatus[result.status];
    metrics.jobs.inc({ model: envelope.model, status });
    const reply = entry?.trace.replyPublish(replyTo.topic);
    sink.send(replyTo.topic, replyTo.partition, result, reply?.headers).then(
      () => {
        reply?.span.end();
        inFlight.delete(envelope.jobId);
        entry?.trace.end(status, result.status !== JobStatus.OK);
        for (const complete of entry?.completions ?? []) complete();
      },
      (err: unknown) => {
        // Stopping: leave the offset uncommitted so the job is redelivered.
        reply?.span.end();
        inFlight.delete(envelope.jobId);
        entry?.trace.end("REDELIVER", true);
        log.warn({ err, jobId: envelope.jobId }, "result not produced; job will be redelivered");
      },
    );
  }

  function reject(envelope: JobEnvelope, status: JobStatus, message: string): void {
    finish(envelope, create(JobResultSchema, { jobId: envelope.jobId, status, message, attempt: envelope.attempt }));
  }

  function onRecord(record: PulledRecord): void {
    let envelope: JobEnvelope;
    try {
      envelope = decodeEnvelope(record.value);
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      metrics.recordsRejected.inc();
      log.warn({ err, topic: record.topic, partition: record.partition, offset: record.offset }, "rejected undecodable job record");
      return record.complete();
    }
    const existing = inFlight.get(envelope.jobId);
    if (existing) {
      // A redelivery (rebalance) of a job this worker is already computing: answer once.
      existing.completions.push(record.complete);
      return;
    }
    const trace = new JobTrace(record, envelope.jobId, envelope.model, groupId, config.workerId);
    inFlight.set(envelope.jobId, { completions: [record.complete], trace });
    if (cancels.has(envelope.jobId)) {
      return reject(envelope, JobStatus.CANCELLED, "the caller left before the job was pulled; nothing was computed");
    }
    if (envelope.deadlineUnixMs > 0n && Date.now() >= Number(envelope.deadlineUnixMs)) {
      return reject(envelope, JobStatus.DEADLINE_EXCEEDED, "deadline passed before the job was pulled; nothing was computed");
    }
    const runner = runners.get(envelope.model);
    if (!runner) return reject(envelope, JobStatus.NOT_FOUND, `model '${envelope.model}' is not served by pool '${config.pool}'`);
    switch (envelope.task.case) {
      case "embed":
        runner.submit(envelope, envelope.task.value, trace, (result) => finish(envelope, result), systemClock.now());
        return;
      default:
        return reject(envelope, JobStatus.INVALID_ARGUMENT, "job carries no task this worker can run");
    }
  }

  async function loadModels(catalog: Catalog): Promise<void> {
    const wanted = [...catalog.models.values()].filter(
      (m) => m.pool === config.pool && (config.models.length === 0 || config.models.includes(m.id)),
    );
    for (const model of wanted) {
      const t0 = performance.now();
      const inference = await createInferencePool({
        spec: model.spec,
        threads: config.inferenceThreads + config.interactiveThreads,
        intraOpThreads: config.intraOpThreads,
        allowSpinning: config.ortAllowSpinning,
        executionProvider: config.executionProvider,
        logger: log,
      });
      pools.push(inference);
      const tokenizer = await createTextTokenizer(model.spec);
      runners.set(
        model.id,
        new EmbedRunner(
          model.spec,
          tokenizer,
          inference,
          {
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
            onBatch(b) {
              const labels = { model: b.model };
              metrics.batches.inc({ model: b.model, reason: b.reason });
              metrics.batchItems.observe(labels, b.items);
              metrics.batchTokens.observe(labels, b.usefulTokens);
              metrics.batchPadding.observe(labels, b.paddedTokens > 0 ? 1 - b.usefulTokens / b.paddedTokens : 0);
              metrics.batchFill.observe(labels, Math.min(1, b.usefulTokens / config.batchMaxTokens));
              metrics.inferenceSeconds.observe(labels, b.inferenceMs / 1000);
              metrics.tokens.inc(labels, b.usefulTokens);
              metrics.paddedTokens.inc(labels, b.paddedTokens);
              metrics.itemsComputed.inc(labels, b.items);
            },
          },
          systemClock,
          log,
        ),
      );
      const loadSeconds = (performance.now() - t0) / 1000;
      metrics.modelLoads.inc({ model: model.id });
      metrics.coldStartSeconds.set({ model: model.id }, loadSeconds);
      metrics.modelsResident.set(runners.size);
      log.info({ model: model.id, loadMs: Math.round(loadSeconds * 1000), provider: inference.info.provider }, "model loaded");
    }
  }

  async function start(): Promise<void> {
    const httpPort = await http.listen(config.httpPort, config.httpHost);
    const catalog = await loadCatalog(config.catalogPath);
    const pool = catalog.pools.get(config.pool);
    if (!pool) throw new Error(`pool '${config.pool}' is not in the catalog ${catalog.path}`);
    await loadModels(catalog);
    await admin.connect();
    await ensureTopics(admin, poolTopicSpecs(pool));
    await sink.start();
    await cancelConsumer.start();
    consumer = createJobConsumer(kafka, logger, {
      groupId,
      topics: [jobsTopic(pool.name, Lane.INTERACTIVE), jobsTopic(pool.name, Lane.BATCH)],
      maxInFlight: config.maxInFlightJobs,
      sessionTimeoutMs: config.sessionTimeoutMs,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      onRecord,
      onLag: (topic, partition, lag) => metrics.consumerLag.set({ topic, partition: String(partition) }, lag),
    });
    await consumer.start();
    probe.start();
    log.info({ pool: pool.name, models: [...runners.keys()], httpPort }, "worker pulling jobs");
  }

  async function shutdown(): Promise<void> {
    consumer?.pause();
    probe.stop();
    const deadline = Date.now() + config.drainGraceMs;
    while (inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    log.info({ unfinished: inFlight.size }, "in-flight jobs drained");
    await consumer?.stop();
    await cancelConsumer.stop();
    await sink.stop();
    await admin.disconnect();
    await Promise.all(pools.map((p) => p.close()));
    await http.close();
    log.info("worker stopped");
  }

  return {
    runners,
    start,
    stop() {
      stopping ??= shutdown();
      return stopping;
    },
  };
}
