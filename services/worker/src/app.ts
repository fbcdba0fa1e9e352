import {
  cancelTopic,
  checkKafkaCertificates,
  createKafka,
  createKafkaProbe,
  ensureTopics,
  loadCatalog,
  poolTopicSpecs,
  statusTopicSpec,
  gatewaysTopicSpec,
  stopSteps,
  type Catalog,
  type Logger,
  createRecordSigner,
  shareSecurity,
  warnIfUnsigned,
  createHubSourceResolver,
  readHubSettings,
  createModelRegistry,
  createSourceResolver,
  type ModelRegistry,
} from "@shoal/common";
import { createBrokerPing } from "@shoal/kafka-share";
import { systemClock } from "./batching/clock.ts";
import { ComputeGate } from "./batching/compute-gate.ts";
import type { WorkerConfig } from "./config.ts";
import { createIntake, poolGroupId, routedTopicSpecs } from "./intake/create-intake.ts";
import type { JobIntake } from "./intake/intake.ts";
import { createJobLifecycle } from "./jobs/job-lifecycle.ts";
import { createCancelConsumer } from "./queue/cancel-consumer.ts";
import { CancelSet } from "./queue/cancel-set.ts";
import { createDirectReplies } from "./queue/direct-replies.ts";
import { createResultSink } from "./queue/result-sink.ts";
import { createReplyRegistry } from "./queue/reply-registry.ts";
import { createRetryRouter } from "./queue/retry-router.ts";
import { CooperativeQueue } from "./tasks/cooperative-queue.ts";
import { createModelFleet, type ModelFleet } from "./tasks/model-fleet.ts";
import { RunForecast } from "./batching/run-forecast.ts";
import { TakeRoundTrip } from "./batching/take-round-trip.ts";
import { runnerOptionsFor } from "./tasks/runner-options.ts";
import { createStatusPublisher, type StatusPublisher } from "./telemetry/status-publisher.ts";
import { statusSnapshot } from "./telemetry/status-snapshot.ts";
import { createWorkerHttp } from "./telemetry/worker-http.ts";
import { createWorkerMetrics } from "./telemetry/worker-metrics.ts";
import { modelReadiness } from "./telemetry/model-readiness.ts";
import { createWorkerPoolLimits, LIMIT_CHECK_WAIT_MS } from "./telemetry/pool-limits.ts";

/** How long a job naming a model this worker has not read from the registry yet waits for it. */
const REGISTRY_LAG_WAIT_MS = 5_000;
/** How long a removed model still runs the jobs accepted before its removal (at most a call's longest deadline). */
const REMOVED_MODEL_GRACE_MS = 10 * 60_000;

export interface WorkerApp {
  start(): Promise<void>;
  /** Idempotent graceful stop: stop fetching, finish in-flight jobs, settle them, leave the group. */
  stop(): Promise<void>;
  /** The pool's models on this worker (undefined before start). */
  readonly fleet: ModelFleet | undefined;
}

/** The worker's composition root: wiring only; a job's life is in jobs/, where jobs come from in intake/. */
export function createWorkerApp(config: WorkerConfig, logger: Logger): WorkerApp {
  const log = logger.child({ component: "app", worker: config.workerId });
  const kafka = createKafka(config.kafka, logger);
  const admin = kafka.admin();
  // With SHOAL_CLUSTER_KEYS, every job, result and cancel record is signed and checked.
  const signer = createRecordSigner(config.clusterKeys);
  warnIfUnsigned(signer, config.kafka.brokers, logger);
  // Results only to reply topics a live gateway registered (reply-registry.ts); SHOAL_REPLY_REGISTRY=0 opts out.
  const registry = config.replyRegistry
    ? createReplyRegistry(kafka, logger, {
        workerId: config.workerId,
        maxGateways: config.maxGateways,
        signer,
        onRejected: (reason) => metrics.registrationsRejected.inc({ reason }),
        onUnproven: () => metrics.unprovenLapses.inc(),
      })
    : undefined;
  const sink = createResultSink(kafka, logger, config.workerId, {
    signer,
    ...(registry ? { registry } : {}),
    onDropped: (reason) => metrics.resultsDropped.inc({ reason }),
    // Straight to the gateway holding the call (the address its signed registration gives).
    ...(registry && config.directReply
      ? { direct: createDirectReplies(logger, { signer, stream: config.directReplyStream, onFallback: (why) => metrics.directFallbacks.inc({ why }) }) }
      : {}),
    onSent: (via) => metrics.resultsSent.inc({ via }),
  });
  const router = createRetryRouter(kafka, logger, { pool: config.pool, workerId: config.workerId, maxAttempts: config.maxAttempts, signer });
  const groupId = poolGroupId(config.pool);
  const cancels = new CancelSet(100_000, 10 * 60_000);
  const cancelConsumer = createCancelConsumer(kafka, logger, { topic: cancelTopic(config.pool), workerId: config.workerId, cancels, signer });
  // Inference capacity shared by every resident model: interactive runs first, then round-robin across models.
  const gate = new ComputeGate(config.inferenceThreads, { interactiveReserve: config.interactiveReserve });
  const metrics = createWorkerMetrics(() => intake?.inFlight ?? 0);
  // Every bootstrap broker is asked on connections of its own: one silent broker of three leaves it ready.
  const securityForShare = shareSecurity(config.kafka);
  const ping = createBrokerPing({
    brokers: config.kafka.brokers,
    clientId: `shoal-worker-${config.workerId}-ping`,
    ...(securityForShare ? { security: securityForShare } : {}),
  });
  const probe = createKafkaProbe((timeoutMs) => ping.ping(timeoutMs), {
    intervalMs: 1_000,
    timeoutMs: 2_000,
    onChange: (reachable, reason) => log.warn({ reachable, reason }, reachable ? "Kafka reachable again" : "Kafka unreachable"),
  });
  const startedUnixMs = Date.now();
  const startedMonoMs = systemClock.now();
  let catalog: Catalog | undefined;
  // The live catalog: the YAML's pools, the registry topic's models (docs/models.md).
  let modelRegistry: ModelRegistry | undefined;
  let fleet: ModelFleet | undefined;
  let status: StatusPublisher | undefined;
  let stopping: Promise<void> | undefined;
  let preloaded = false;
  let intake: JobIntake | undefined;
  let shareIntake = false;
  // With a routed intake beside the share group, a model that cannot load fails its job rather
  // than releasing it: a released routed record would wait for a rebalance of this worker's own group.
  let releaseRedelivers = false;

  // When this worker's compute next frees up, from its model calls in progress: only the take-ahead reads it.
  const forecast = config.takeAheadMs !== 0 ? new RunForecast() : undefined;
  // SHOAL_TAKE_AHEAD_MS=auto: the lead follows the measured take round trip.
  // Benchmarks only: a simulated network between broker and worker puts Kafka's latency on the devices' clock.
  const fetchDelayMs = config.runtime.kind === "simulated" ? (config.runtime.fetchDelayMs ?? 0) : 0;
  const roundTrip = config.takeAheadMs === "auto" ? new TakeRoundTrip(fetchDelayMs) : undefined;
  const jobs = createJobLifecycle({
    pool: config.pool,
    workerId: config.workerId,
    groupId,
    maxInFlight: config.maxInFlightJobs,
    maxInFlightBytes: config.maxInFlightBytes,
    // A shared queue: take jobs only as fast as they can start; a crashing job stops at the
    // broker's delivery limit (one short, so it is dead-lettered with its reason, not dropped).
    get prefetchTokens() {
      return shareIntake ? config.prefetchTokens : undefined;
    },
    idleTakeTokens: config.idleTakeTokens,
    perCallOverheadTokens: config.perCallOverheadTokens,
    takeAheadMs: typeof config.takeAheadMs === "number" ? config.takeAheadMs : () => roundTrip?.leadMs(),
    batchMaxTokens: config.batchMaxTokens,
    ...(fetchDelayMs ? { arrivalDelayMs: fetchDelayMs } : {}),
    ...(forecast ? { msToDrain: (waitingUnits: number) => forecast.msToDrain(waitingUnits) } : {}),
    get maxDeliveries() {
      return shareIntake ? config.shareDeliveryLimit - 1 : undefined;
    },
    get releaseRedelivers() {
      return releaseRedelivers;
    },
    model: (id) => catalog?.models.get(id),
    // Registry lag: a model added a moment ago at a gateway is waited for, briefly.
    awaitModel: (id, revision) => modelRegistry?.waitFor(id, revision, REGISTRY_LAG_WAIT_MS) ?? Promise.resolve(undefined),
    fleet: {
      tryAcquire: (model) => fleet!.tryAcquire(model),
      acquire: (model) => fleet!.acquire(model),
      loadFailure: (model) => fleet?.loadFailure(model),
    },
    results: sink,
    retries: router,
    cancels,
    metrics,
    signer,
    logger,
    monotonicNow: () => systemClock.now(),
  });

  const http = createWorkerHttp(metrics.registry, () => {
    if (!preloaded) return { ready: false, reason: "loading start-up models" };
    if (!intake?.ready) return { ready: false, reason: `not taking jobs (${intake?.kind ?? "no"} intake not joined)` };
    if (!probe.reachable) return { ready: false, reason: "Kafka unreachable" };
    if (stopping) return { ready: false, reason: "draining" };
    const resident = fleet?.residency.snapshot().filter((m) => m.state === "resident").length ?? 0;
    const poolModels = [...(catalog?.models.values() ?? [])].filter((m) => m.pool === config.pool).map((m) => m.id);
    const models = modelReadiness(poolModels, resident, fleet?.loadFailures() ?? []);
    return models.ready ? { ready: true, reason: `${models.reason}, ${intake.kind} intake joined` } : models;
  });

  async function start(): Promise<void> {
    // An untrusted broker certificate stops the start at once, named (kafkajs would retry it ~10 s),
    // before minutes of model loading.
    await checkKafkaCertificates(config.kafka);
    const httpPort = await http.listen(config.httpPort, config.httpHost);
    modelRegistry = createModelRegistry(kafka, logger, {
      catalog: await loadCatalog(config.catalogPath),
      // Folders, and hf: ids fetched into this host's huggingface_hub cache.
      resolver: createSourceResolver({ hub: createHubSourceResolver({ logger }) }),
      // hf: models are known from their records and fetched into this cache on their first need.
      hubCacheDir: readHubSettings().cacheDir,
      instanceId: `worker-${config.workerId}`,
      signer,
      topic: config.registryTopic,
      retiredGraceMs: REMOVED_MODEL_GRACE_MS,
    });
    await modelRegistry.start();
    catalog = modelRegistry.catalog;
    const pool = catalog.pools.get(config.pool);
    if (!pool) throw new Error(`pool '${config.pool}' is not in the catalog ${catalog.path}`);
    const tokenizeQueue = new CooperativeQueue();
    const runnerOptions = runnerOptionsFor({
      config,
      gate,
      ...(forecast ? { forecast } : {}),
      tokenizeQueue,
      metrics,
      isCancelled: (jobId) => cancels.has(jobId),
    });
    fleet = await createModelFleet({ config, catalog, gate, metrics, clock: systemClock, logger, runnerOptions, onChange: () => status?.changed() });
    await fleet.preload();
    preloaded = true;
    await admin.connect();
    await ensureTopics(admin, [
      ...poolTopicSpecs(pool),
      statusTopicSpec,
      gatewaysTopicSpec,
      ...(config.routedIntake ? routedTopicSpecs(pool.name, config.workerId) : []),
    ]);
    // The registrations already on the topic are read before the first job is taken.
    await registry?.start();
    await sink.start();
    await router.start();
    await cancelConsumer.start();
    status = createStatusPublisher(kafka, logger, {
      workerId: config.workerId,
      intervalMs: config.statusIntervalMs,
      signer,
      snapshot: () =>
        statusSnapshot({
          config,
          startedUnixMs,
          startedMonoMs,
          residency: () => fleet?.residency,
          inFlightJobs: () => intake?.inFlight ?? 0,
          pendingTokens: () => jobs.pendingTokens,
          draining: () => stopping !== undefined,
        }),
    });
    await status.start();
    // Before joining: does the pool fit the brokers' share-group limits, this worker included? (#53)
    const limits = createWorkerPoolLimits(config, pool, metrics.registry, logger, () => intake?.inFlight ?? 0);
    if (limits) await Promise.race([limits.start(), new Promise((r) => setTimeout(r, LIMIT_CHECK_WAIT_MS).unref())]);
    // Routed jobs are this worker's alone: take all of them (the slots), so the pending tokens it
    // publishes count its whole queue; the prefetch budget applies to the shared queue only.
    intake = createIntake({
      kafka,
      config,
      pool,
      metrics,
      logger,
      wake: (topic, partition) => router.wake(topic, partition),
      routedRoom: () => (jobs.heldBytes >= config.maxInFlightBytes ? 0 : Math.max(0, config.maxInFlightJobs - jobs.size)),
      ...(roundTrip ? { onFetched: (ms: number) => roundTrip.fetched(ms) } : {}),
      // A give-back costs another worker a take round trip: keep the job if this worker starts it sooner.
      ...(roundTrip && config.shareKeepWithinTrip ? { keepsHere: () => roundTrip.covers(jobs.msToDrain()) } : {}),
    });
    shareIntake = intake.kind === "share" || intake.kind === "share+routed";
    releaseRedelivers = intake.kind === "share";
    if (fetchDelayMs) log.warn({ fetchDelayMs }, "SHOAL_SIM_FETCH_DELAY_MS: simulated network, every job reaches this worker late");
    await intake.start(jobs);
    probe.start();
    const resident = fleet.residency
      .snapshot()
      .filter((m) => m.state === "resident")
      .map((m) => m.model);
    log.info(
      { pool: pool.name, intake: intake.kind, resident, budgetBytes: config.memoryBudgetBytes, policy: config.residencyPolicy, httpPort },
      "worker pulling jobs",
    );
  }

  async function shutdown(): Promise<void> {
    intake?.pause();
    probe.stop();
    void ping.close();
    status?.changed();
    const unfinished = await jobs.drain(config.drainGraceMs);
    log.info({ unfinished }, "in-flight jobs drained");
    // Past the grace: skip what was not computed yet; the intake gives those jobs back.
    if (unfinished > 0) for (const jobId of jobs.abandon()) cancels.add(jobId, Date.now() + 60_000);
    await stopSteps(log, [
      ["intake", () => intake?.stop()],
      ["cancel consumer", () => cancelConsumer.stop()],
      ["status publisher", () => status?.stop()],
      ["retry router", () => router.stop()],
      ["result sink", () => sink.stop()],
      ["reply registry", () => registry?.stop()],
      ["model registry", () => modelRegistry?.stop()],
      ["admin", () => admin.disconnect()],
      ["models", () => fleet?.close()],
      ["http", () => http.close()],
    ]);
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
