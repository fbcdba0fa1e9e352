import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  boundLabel,
  checkKafkaCertificates,
  createKafka,
  createKafkaProbe,
  ensureTopics,
  loadCatalog,
  MAX_RECORD_BYTES,
  poolTopicSpecs,
  replyTopic,
  shareSecurity,
  statusTopicSpec,
  gatewaysTopicSpec,
  stopSteps,
  type Logger,
  type PoolLimitMonitor,
  createRecordSigner,
  warnIfUnsigned,
  createModelRegistry,
  createHubSourceResolver,
  createSourceResolver,
  type ModelRegistry,
} from "@shoal/common";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { ClusterService } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@shoal/gen/grpc/health/v1/health_pb.ts";
import { isLoopback, type GatewayConfig } from "./config.ts";
import { Admission } from "./admission.ts";
import { ApiKeys, callerKey, connectionOf, requireApiKey } from "./auth.ts";
import { createDualServer, type DualServer } from "./dual-server.ts";
import { createTlsServer } from "./tls-server.ts";
import { createBrokerPing, createLagReader } from "@shoal/kafka-share";
import { createGatewayPoolLimits } from "./pool-limits.ts";
import { createLaneLagMonitor, type LaneLagMonitor } from "./lane-lag.ts";
import { backlogSources } from "./lane-backlog.ts";
import { createGatewayMetrics } from "./gateway-metrics.ts";
import { rpcMetrics } from "./rpc-metrics.ts";
import { traceRpc } from "./rpc-tracing.ts";
import { createHealthService, HealthState } from "./health-service.ts";
import { createClusterService } from "./cluster-service.ts";
import { createClusterState } from "./cluster-state.ts";
import { createInferenceService } from "./inference-service.ts";
import { EmbedCache } from "./embed-cache/embed-cache.ts";
import { createJobProducer } from "./job-producer.ts";
import { createModelService } from "./model-service.ts";
import { createModelAdminService } from "./model-admin-service.ts";
import { PendingJobs, RESULT_AFTER_UNAVAILABLE } from "./pending-jobs.ts";
import { createDirectReplyServer } from "./direct-replies.ts";
import { createReplyConsumer } from "./reply-consumer.ts";
import { createReplyRegistration } from "./reply-registration.ts";
import { createConsoleStatic } from "./console-static.ts";
import { createCors } from "./cors.ts";
import { createHttpFront } from "./http-front.ts";
import { createJsonDecoder } from "./json-decoder.ts";
import { createLargeJsonCalls } from "./large-json-calls.ts";
import { createOpenAiEmbeddings } from "./openai-embeddings.ts";
import { type BatchApi, createBatchApi } from "./batch/batch-api.ts";
import { createCohereRoutes } from "./cohere-routes.ts";
import { createTeiRoutes } from "./tei-routes.ts";
import { liveDefaultModel } from "./route-fields.ts";
import { registerReflection } from "./reflection-service.ts";
import { createRoutedDispatch, type RoutedDispatch } from "./dispatch/routed-dispatch.ts";
import { mapErrors } from "./map-errors.ts";

export interface GatewayApp {
  /** Resolves with the bound port once the gateway serves. */
  start(): Promise<{ port: number }>;
  /** Idempotent graceful stop: refuse new calls, wait for in-flight ones, close clients. */
  stop(): Promise<void>;
}

/**
 * Lane-lag polls while the cluster is quiet (no backlog, no call in flight here): every 5 s instead
 * of every second; the first admitted call wakes the monitor (lane-lag.ts, LagPollOptions).
 */
export const LAG_IDLE_POLL_MS = 5_000;

/** Body cap of every RPC but inference (models, cluster, health, reflection): their requests are tiny. */
export const METADATA_MAX_REQUEST_BYTES = 64 * 1024;

/** The gateway's composition root. */
export function createGatewayApp(config: GatewayConfig, logger: Logger): GatewayApp {
  const log = logger.child({ component: "app", instance: config.instanceId });
  const kafka = createKafka(config.kafka, logger);
  const admin = kafka.admin();
  // A result for a job answered Unavailable (its record's fate unknown): the chaos checker counts these.
  const pending = new PendingJobs((jobId) => {
    metrics.resultsAfterUnavailable.inc();
    log.warn({ jobId }, RESULT_AFTER_UNAVAILABLE);
  });
  // With SHOAL_CLUSTER_KEYS, jobs and cancels are signed and results checked (record-signer.ts).
  const signer = createRecordSigner(config.clusterKeys);
  warnIfUnsigned(signer, config.kafka.brokers, log);
  const producer = createJobProducer(kafka, logger, config.produceTimeoutMs, signer);
  const ownReplyTopic = replyTopic(config.instanceId);
  const replies = createReplyConsumer(kafka, logger, {
    topic: ownReplyTopic,
    groupId: `shoal-gateway-${config.instanceId}`,
    onResult: (result) => pending.settle(result),
    onDropped: (n) => metrics.resultsDropped.inc(n),
    signer,
    onForged: () => metrics.recordsRejected.inc({ reason: "signature" }),
  });
  // Results straight from workers, the reply topic their fallback (issue #17; SHOAL_DIRECT_REPLY=0: off).
  const directReplies =
    config.directReply === undefined
      ? undefined
      : createDirectReplyServer(logger, {
          instanceId: config.instanceId,
          replyTopic: ownReplyTopic,
          ...config.directReply,
          onResult: (result) => pending.settle(result),
          signer,
          onReceived: (outcome) => {
            metrics.directResults.inc();
            if (outcome === "unknown") metrics.resultsDropped.inc();
          },
          onRefused: (reason) => metrics.recordsRejected.inc({ reason: `direct_${reason}` }),
        });
  let directReplyAddress: string | undefined;
  // This replica's reply topic (and direct-reply address), registered on shoal.gateways for workers.
  const registration = createReplyRegistration(kafka, logger, {
    instanceId: config.instanceId,
    replyTopic: ownReplyTopic,
    intervalMs: config.registrationIntervalMs,
    signer,
    directReplyAddress: () => directReplyAddress,
  });
  // Which workers are alive and what they hold, from the status topic they publish to.
  // Bounded and expiring; with cluster keys, only signed status records count.
  const cluster = createClusterState(kafka, logger, {
    groupId: `shoal-gateway-status-${config.instanceId}`,
    maxWorkers: config.maxWorkers,
    signer,
    onRejected: (reason) => metrics.statusRejected.inc({ reason }),
  });
  const health = new HealthState([InferenceService.typeName, ModelService.typeName, ModelAdminService.typeName, ClusterService.typeName]);
  const metrics = createGatewayMetrics(
    () => pending.size,
    () => lagMonitor?.lag ?? new Map(),
    () => cluster.size,
    () => ({ bytes: embedCache?.bytes ?? 0, entries: embedCache?.entries ?? 0 }),
  );
  // Vectors by tenant, model revision, options and text; identical texts in flight computed once (docs/cache.md).
  const embedCache =
    config.embedCache.maxBytes === 0
      ? undefined
      : new EmbedCache({
          maxBytes: config.embedCache.maxBytes,
          batchDependentModels: config.embedCache.batchDependentModels,
          events: {
            hit: () => metrics.embedCacheHits.inc(),
            miss: () => metrics.embedCacheMisses.inc(),
            join: () => metrics.embedCacheJoins.inc(),
            evict: () => metrics.embedCacheEvictions.inc(),
          },
        });
  // Readiness follows the broker: NOT_SERVING within seconds of losing it, SERVING when it returns.
  // Every bootstrap broker is asked on connections of its own: one silent broker of three leaves it ready.
  const shareSecurityOptions = shareSecurity(config.kafka);
  const ping = createBrokerPing({
    brokers: config.kafka.brokers,
    clientId: `shoal-gateway-${config.instanceId}-ping`,
    ...(shareSecurityOptions ? { security: shareSecurityOptions } : {}),
  });
  const probe = createKafkaProbe((timeoutMs) => ping.ping(timeoutMs), {
    intervalMs: 1_000,
    timeoutMs: 2_000,
    onChange(reachable, reason) {
      log.warn({ reachable, reason }, reachable ? "Kafka reachable again" : "Kafka unreachable");
      if (stopping === undefined) health.setAll(reachable ? Serving.SERVING : Serving.NOT_SERVING);
    },
  });
  // Token-priced admission per lane, from this replica's in-flight calls and the lanes' lag.
  const admission = new Admission({
    interactive: { maxInFlightTokens: config.admission.interactive.maxInFlightTokens, maxQueuedTokens: config.admission.interactive.maxQueuedTokens },
    batch: { maxInFlightTokens: config.admission.batch.maxInFlightTokens, maxQueuedTokens: config.admission.batch.maxQueuedTokens },
  });
  let lagMonitor: LaneLagMonitor | undefined;
  let poolLimits: PoolLimitMonitor | undefined;
  // Every pool's backlog (share coordinator or committed offsets, and watermarks) over one
  // client that keeps its connections, coordinators and metadata between polls.
  const lagReader = createLagReader({
    brokers: config.kafka.brokers,
    clientId: `shoal-gateway-${config.instanceId}-lag`,
    ...(shareSecurityOptions ? { security: shareSecurityOptions } : {}),
  });
  // No key configured: authentication is off.
  const apiKeys = new ApiKeys(config.apiKeys);
  // Large Connect JSON bodies are decoded on a thread of their own (issue #52).
  const jsonDecoder = createJsonDecoder();
  let server: DualServer | undefined;
  // The live catalog: the YAML's pools, the models of the registry topic (docs/models.md).
  let registry: ModelRegistry | undefined;
  let batchApi: BatchApi | undefined;
  let stopping: Promise<void> | undefined;
  // SHOAL_DISPATCH other than shared: this gateway picks each job's worker from its own view of the status topic.
  const dispatchConfig = config.dispatch;
  // Worker ids come from status records: at most SHOAL_MAX_WORKERS of them become label values.
  const workerLabel = boundLabel(config.maxWorkers);
  const dispatch: RoutedDispatch | undefined =
    dispatchConfig.mode === "shared"
      ? undefined
      : createRoutedDispatch({
          config: dispatchConfig,
          workers: () => cluster.workers(),
          resend: (topic, message) => producer.send(topic, message),
          logger,
          onPlaced: (pool, p) => metrics.dispatched.inc({ pool, worker: p.workerId === undefined ? "" : workerLabel(p.workerId) }),
          onRescued: (worker) => metrics.rescued.inc({ worker: workerLabel(worker) }),
        });

  // Folders, and hf: ids through the Hub client (HF_ENDPOINT, HF_TOKEN, the huggingface_hub cache).
  const sources = createSourceResolver({ hub: createHubSourceResolver({ logger }) });

  async function start(): Promise<{ port: number }> {
    // An untrusted broker certificate stops the start at once, named (kafkajs would retry it ~10 s).
    await checkKafkaCertificates(config.kafka);
    const reg = createModelRegistry(kafka, logger, {
      catalog: await loadCatalog(config.catalogPath),
      resolver: sources,
      instanceId: config.instanceId,
      signer,
      topic: config.registryTopic,
    });
    registry = reg;
    await reg.start();
    const catalog = reg.catalog;
    await admin.connect();
    await ensureTopics(admin, [
      ...[...catalog.pools.values()].flatMap(poolTopicSpecs),
      statusTopicSpec,
      gatewaysTopicSpec,
      {
        topic: ownReplyTopic,
        partitions: config.replyPartitions,
        // Replies matter only while their caller waits; an abandoned topic ages out.
        config: { "retention.ms": String(3_600_000), "max.message.bytes": String(MAX_RECORD_BYTES) },
      },
    ]);
    await producer.start();
    await replies.start();
    directReplyAddress = await directReplies?.start();
    await registration.start();
    await cluster.start();
    dispatch?.start();
    lagMonitor = createLaneLagMonitor(backlogSources(lagReader), admission, [...catalog.pools.values()], logger, {
      intervalMs: 1_000,
      idleIntervalMs: LAG_IDLE_POLL_MS,
      inFlight: () => pending.size,
    });
    // Serve with the lanes' figures in place (GetCluster, admission), waiting at most 3 s for them.
    await Promise.race([lagMonitor.start(), new Promise((r) => setTimeout(r, 3_000).unref())]);
    // Do the share pools fit the brokers' share-group limits? Warns, never stops the start (#53).
    poolLimits = createGatewayPoolLimits(
      {
        brokers: config.kafka.brokers,
        clientId: `shoal-gateway-${config.instanceId}-limits`,
        ...(shareSecurityOptions ? { security: shareSecurityOptions } : {}),
      },
      [...catalog.pools.values()],
      metrics.registry,
      logger,
    );
    void poolLimits.start();
    const unknownModels = [...new Set(config.apiKeys.flatMap((k) => (k.models === "*" ? [] : k.models)))].filter((m) => !catalog.models.has(m));
    if (unknownModels.length > 0) log.warn({ models: unknownModels }, "API keys name models the catalog does not serve");

    // One implementation behind both the Connect routes and the OpenAI-compatible endpoint.
    const inference = createInferenceService({
      catalog,
      producer,
      pending,
      replyTopic: ownReplyTopic,
      limits: config,
      defaultTimeoutMs: config.defaultTimeoutMs,
      maxTimeoutMs: config.maxTimeoutMs,
      isAccepting: () => stopping === undefined,
      isQueueReachable: () => probe.reachable,
      admission,
      onAdmitted: (lane, tokens) => lagMonitor?.observeJob(lane, tokens),
      onRejected: (lane, reason) => metrics.admissionRejections.inc({ lane, reason }),
      onAbandoned: (how, jobId, err) => {
        metrics.abandonedJobs.inc({ how });
        // With the job's written and taken lines, a call that timed out can be followed to where its job stopped.
        if (jobId !== "") logger.debug({ jobId, how, err: (err as Error).message }, "call ended without its result");
      },
      dispatch,
      embedCache,
    });
    // OpenAI's Batch API: files and batch state in Kafka, each line an Embed on the batch lane (docs/batch.md).
    const batch = createBatchApi({
      kafka,
      kafkaSettings: config.kafka,
      logger,
      config: config.batch,
      instanceId: config.instanceId,
      apiKeys,
      apiKeySpecs: config.apiKeys,
      embed: (req, ctx) => inference.embed(req, ctx),
      models: catalog.models,
    });
    batchApi = batch;
    await batch.start();
    // Outermost first: the trace and the metrics see the final, mapped code (and the caller's
    // tenant, which the key check leaves in the context values); key errors are mapped too. The
    // Connect routes and the OpenAI endpoint share this one chain.
    const interceptors = [
      traceRpc(config.instanceId),
      rpcMetrics(metrics, (id) => catalog.models.has(id)),
      mapErrors(logger),
      ...(apiKeys.enabled ? [requireApiKey(apiKeys)] : []),
    ];
    const handler = connectNodeAdapter({
      interceptors,
      contextValues: (req) => createContextValues().set(callerKey, connectionOf(req.socket)),
      readMaxBytes: config.maxRequestBytes,
      // Compressed requests are accepted, but responses are never compressed: vectors are
      // incompressible float noise and gzip cost more CPU than the whole rest of the call.
      compressMinBytes: Number.MAX_SAFE_INTEGER,
      routes(router) {
        router.service(InferenceService, inference);
        // Per-route body caps: only inference takes large bodies; metadata calls are a few bytes.
        const small = { readMaxBytes: METADATA_MAX_REQUEST_BYTES };
        router.service(
          ModelService,
          createModelService(
            catalog,
            () => cluster.workers(),
            (id) => reg.state.aliasesOf(id),
          ),
          small,
        );
        router.service(ModelAdminService, createModelAdminService({ registry: reg, resolver: sources, workers: () => cluster.workers() }), small);
        router.service(
          ClusterService,
          createClusterService(cluster, () => lagMonitor?.lag ?? new Map()),
          small,
        );
        router.service(Health, createHealthService(health), small);
        registerReflection(router, [InferenceService, ModelService, ModelAdminService, ClusterService, Health], small);
      },
      fallback(req, res) {
        const reply = (status: number, body: string): void => {
          res.writeHead(status, { "content-type": "text/plain" });
          res.end(body);
        };
        if (req.url === "/metrics" && apiKeys.enabled && !apiKeys.recognises(req.headers.authorization)) {
          // With keys on, the scrape needs one (Prometheus: authorization.credentials_file).
          res.writeHead(401, { "content-type": "text/plain", "www-authenticate": 'Bearer realm="shoal"' });
          res.end("/metrics needs an API key when keys are configured\n");
        } else if (req.url === "/metrics") {
          void metrics.registry.metrics().then((body) => {
            res.writeHead(200, { "content-type": metrics.registry.contentType });
            res.end(body);
          });
        } else if (req.url === "/healthz") reply(200, "ok\n");
        else if (req.url === "/readyz") {
          const ready = health.get("") === Serving.SERVING;
          reply(ready ? 200 : 503, ready ? "ready\n" : "not ready\n");
        } else reply(404, "not found\n");
      },
    });
    const front = createHttpFront({
      cors: createCors(config.corsOrigins),
      batch: batch.handle,
      openai: createOpenAiEmbeddings({
        embed: (req, ctx) => inference.embed(req, ctx),
        interceptors,
        models: catalog.models,
        maxRequestBytes: config.maxRequestBytes,
        logger,
      }),
      cohere: createCohereRoutes({
        embed: (req, ctx) => inference.embed(req, ctx),
        rerank: (req, ctx) => inference.rerank(req, ctx),
        interceptors,
        models: catalog.models,
        maxRequestBytes: config.maxRequestBytes,
        logger,
      }),
      tei: createTeiRoutes({
        embed: (req, ctx) => inference.embed(req, ctx),
        rerank: (req, ctx) => inference.rerank(req, ctx),
        tokenize: (req, ctx) => inference.tokenize(req, ctx),
        interceptors,
        embedModel: liveDefaultModel(catalog.models, "embed", config.tei.embedModel),
        rerankModel: liveDefaultModel(catalog.models, "rerank", config.tei.rerankModel),
        maxRequestBytes: config.maxRequestBytes,
        maxInputsPerRequest: config.maxInputsPerRequest,
        isReady: () => health.get("") === Serving.SERVING,
        version: "shoal",
        logger,
      }),
      console: createConsoleStatic(config.consoleDir),
      connect: handler,
      largeJson: createLargeJsonCalls({ service: inference, interceptors, decoder: jsonDecoder, maxRequestBytes: config.maxRequestBytes, logger }),
      ...(apiKeys.enabled ? { keyRefusal: (authorization: string | undefined) => apiKeys.refusal(authorization) } : {}),
      // Counted as the interceptors count a refused call (no model, no tenant).
      onRefused: (method) =>
        metrics.requests.inc({ method: /^[A-Za-z]{1,40}$/.test(method) ? method : "unknown", model: "", lane: "", code: "Unauthenticated", tenant: "" }),
    });
    // TLS: one HTTPS port, ALPN h2 + http/1.1; plain text: HTTP/1.1 and h2c told apart by the preface.
    server = config.tls ? createTlsServer(front, config.tls, config.connectionLimits) : createDualServer(front, { limits: config.connectionLimits });
    if (config.insecurePublic && !isLoopback(config.host) && (!apiKeys.enabled || config.tls === undefined)) {
      log.warn(
        { host: config.host, apiKeys: apiKeys.enabled, tls: config.tls !== undefined },
        `SHOAL_INSECURE_PUBLIC=1: serving off loopback WITHOUT ${[apiKeys.enabled ? "" : "API keys", config.tls ? "" : "TLS"].filter((x) => x !== "").join(" and ")} — anyone who reaches this port can call it`,
      );
    }
    const address = await server.listen(config.port, config.host);
    health.setAll(Serving.SERVING);
    probe.start();
    log.info(
      {
        host: config.host,
        port: address.port,
        tls: config.tls !== undefined,
        apiKeys: apiKeys.enabled ? apiKeys.tenants : false,
        models: [...catalog.models.keys()],
        replyTopic: ownReplyTopic,
        dispatch: dispatchConfig.mode,
      },
      "gateway serving",
    );
    return { port: address.port };
  }

  /** Every step runs even if an earlier one failed (stopSteps); the stop fails if any did. */
  async function shutdown(): Promise<void> {
    await stopSteps(log, [
      [
        "refuse new calls",
        () => {
          health.setAll(Serving.NOT_SERVING);
          probe.stop();
          void ping.close();
          lagMonitor?.stop();
          poolLimits?.stop();
        },
      ],
      ["stop batch runs (each saves what it finished)", () => batchApi?.stop()],
      [
        "drain in-flight calls",
        async () => {
          const inFlight = pending.size;
          const drained = await pending.drained(config.drainGraceMs);
          log.info({ inFlight, drained }, "in-flight calls drained");
        },
      ],
      ["close the server", () => server?.close()],
      ["stop the JSON thread", () => jsonDecoder.close()],
      ["withdraw the reply topic registration", () => registration.stop()],
      ["stop the reply consumer", () => replies.stop()],
      ["stop taking direct results", () => directReplies?.stop()],
      ["stop routed dispatch", () => dispatch?.stop()],
      ["stop the cluster-state consumer", () => cluster.stop()],
      ["stop following the model registry", () => registry?.stop()],
      ["stop the job producer", () => producer.stop()],
      [
        "delete this replica's reply topic and groups",
        async () => {
          try {
            await admin.deleteTopics({ topics: [ownReplyTopic], timeout: 5_000 });
            await admin.deleteGroups([`shoal-gateway-${config.instanceId}`, `shoal-gateway-status-${config.instanceId}`]);
          } catch (err) {
            // Not a failed stop: the topic ages out (retention) and the groups expire with their offsets.
            log.warn({ err }, "could not delete this replica's reply topic and consumer groups");
          }
        },
      ],
      ["disconnect the admin clients", () => Promise.all([admin.disconnect(), lagReader.close()])],
    ]);
    log.info("gateway stopped");
  }

  return {
    start,
    stop() {
      stopping ??= shutdown();
      return stopping;
    },
  };
}
