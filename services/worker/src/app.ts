import { createKafka, decodeEnvelope, ensureTopics, jobsTopic, loadCatalog, poolTopicSpecs, RecordDecodeError, type Logger } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobStatus, JobResultSchema, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { create } from "@bufbuild/protobuf";
import { systemClock } from "./batching/clock.ts";
import type { WorkerConfig } from "./config.ts";
import { createJobConsumer, type PulledRecord } from "./queue/job-consumer.ts";
import { createResultSink } from "./queue/result-sink.ts";
import { createInferencePool, type InferencePool } from "./runtime/inference-pool.ts";
import { createTextTokenizer } from "./runtime/text-tokenizer.ts";
import { EmbedRunner } from "./tasks/embed-runner.ts";

export interface WorkerApp {
  start(): Promise<void>;
  /** Idempotent graceful stop: stop fetching, finish in-flight jobs, commit, leave the group. */
  stop(): Promise<void>;
  readonly runners: ReadonlyMap<string, EmbedRunner>;
}

interface InFlight {
  /** Completion callbacks of every delivery of this job (redeliveries attach here). */
  readonly completions: Array<() => void>;
}

/** The worker's composition root. */
export function createWorkerApp(config: WorkerConfig, logger: Logger): WorkerApp {
  const log = logger.child({ component: "app", worker: config.workerId });
  const kafka = createKafka(config.kafka, logger);
  const sink = createResultSink(kafka, logger, config.workerId);
  const runners = new Map<string, EmbedRunner>();
  const pools: InferencePool[] = [];
  const inFlight = new Map<string, InFlight>();
  let consumer: ReturnType<typeof createJobConsumer> | undefined;
  let stopping: Promise<void> | undefined;

  /** Produces the result, then releases every delivery of the job (offsets become committable). */
  function finish(envelope: JobEnvelope, result: JobResult): void {
    const replyTo = envelope.replyTo!;
    sink.send(replyTo.topic, replyTo.partition, result).then(
      () => {
        const entry = inFlight.get(envelope.jobId);
        inFlight.delete(envelope.jobId);
        for (const complete of entry?.completions ?? []) complete();
      },
      (err: unknown) => {
        // Stopping: leave the offset uncommitted so the job is redelivered.
        inFlight.delete(envelope.jobId);
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
      log.warn({ err, topic: record.topic, partition: record.partition, offset: record.offset }, "rejected undecodable job record");
      return record.complete();
    }
    const existing = inFlight.get(envelope.jobId);
    if (existing) {
      // A redelivery (rebalance) of a job this worker is already computing: answer once.
      existing.completions.push(record.complete);
      return;
    }
    inFlight.set(envelope.jobId, { completions: [record.complete] });
    if (envelope.deadlineUnixMs > 0n && Date.now() >= Number(envelope.deadlineUnixMs)) {
      return reject(envelope, JobStatus.DEADLINE_EXCEEDED, "deadline passed before the job was pulled; nothing was computed");
    }
    const runner = runners.get(envelope.model);
    if (!runner) return reject(envelope, JobStatus.NOT_FOUND, `model '${envelope.model}' is not served by pool '${config.pool}'`);
    switch (envelope.task.case) {
      case "embed":
        runner.submit(envelope, envelope.task.value, (result) => finish(envelope, result), systemClock.now());
        return;
      default:
        return reject(envelope, JobStatus.INVALID_ARGUMENT, "job carries no task this worker can run");
    }
  }

  async function start(): Promise<void> {
    const catalog = await loadCatalog(config.catalogPath);
    const pool = catalog.pools.get(config.pool);
    if (!pool) throw new Error(`pool '${config.pool}' is not in the catalog ${catalog.path}`);
    const wanted = [...catalog.models.values()].filter(
      (m) => m.pool === config.pool && (config.models.length === 0 || config.models.includes(m.id)),
    );
    for (const model of wanted) {
      const t0 = performance.now();
      const inference = await createInferencePool({
        spec: model.spec,
        threads: config.inferenceThreads,
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
              maxBatchTokens: config.batchMaxTokens,
              maxBatchItems: config.batchMaxItems,
              maxWaitMs: config.batchMaxWaitMs,
              concurrency: config.inferenceThreads,
            },
            perCallOverheadTokens: config.perCallOverheadTokens,
          },
          systemClock,
          log,
        ),
      );
      log.info({ model: model.id, loadMs: Math.round(performance.now() - t0), provider: inference.info.provider }, "model loaded");
    }

    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, poolTopicSpecs(pool));
    await admin.disconnect();
    await sink.start();
    consumer = createJobConsumer(kafka, logger, {
      groupId: `shoal-pool-${pool.name}`,
      topics: [jobsTopic(pool.name, Lane.INTERACTIVE), jobsTopic(pool.name, Lane.BATCH)],
      maxInFlight: config.maxInFlightJobs,
      sessionTimeoutMs: config.sessionTimeoutMs,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      onRecord,
    });
    await consumer.start();
    log.info({ pool: pool.name, models: [...runners.keys()] }, "worker pulling jobs");
  }

  async function shutdown(): Promise<void> {
    consumer?.pause();
    const deadline = Date.now() + config.drainGraceMs;
    while (inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    log.info({ unfinished: inFlight.size }, "in-flight jobs drained");
    await consumer?.stop();
    await sink.stop();
    await Promise.all(pools.map((p) => p.close()));
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
