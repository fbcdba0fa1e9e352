export { firstExisting } from "./asset-path.ts";
export { createLogger, type Logger } from "./logger.ts";
export { createKafka, shareSecurity, type KafkaSaslSettings, type KafkaSettings, type KafkaTlsSettings } from "./kafka.ts";
export { readKafkaSettings } from "./kafka-settings.ts";
export { EnvReader, ConfigError } from "./env-config.ts";
export { parseConfigText } from "./config-file.ts";
export { isJsonObject, type JsonObject } from "./json.ts";
export { closeGracefully, listenOn, type OpenConnections } from "./servers.ts";
export {
  cancelTopic,
  deadLetterTopic,
  replyTopic,
  retryTopic,
  WAKE_HEADER,
  COMPACTED_STATE_CONFIG,
  ensureTopics,
  poolTopicSpecs,
  statusTopicSpec,
  GATEWAYS_TOPIC,
  gatewaysTopicSpec,
  STATUS_TOPIC,
  signedKindOf,
  MAX_RECORD_BYTES,
  type TopicSpec,
} from "./topics.ts";
export {
  DIRECT_REPLY_PATH,
  DIRECT_REPLY_STREAM_PATH,
  DIRECT_REPLY_GATEWAY_HEADER,
  DIRECT_REPLY_OUTCOME_HEADER,
  delimitedReader,
  DelimitedTooLargeError,
} from "./direct-reply.ts";
export {
  isLaneName,
  jobsTopic,
  jobTopicFor,
  laneJobTopics,
  modelJobsTopic,
  type PoolLayout,
  laneFromName,
  laneName,
  LANE_NAMES,
  ROUTED_WORKER_ID,
  routedTopic,
  SERVED_LANES,
  servedLane,
  type LaneName,
  type ServedLane,
} from "./lanes.ts";
export {
  encodeEnvelope,
  decodeEnvelope,
  encodeResult,
  decodeResult,
  encodeCancel,
  decodeCancel,
  encodeStatus,
  decodeStatus,
  encodeGatewayRegistration,
  decodeGatewayRegistration,
  RecordDecodeError,
} from "./codec.ts";
export {
  ClusterKeyError,
  createRecordSigner,
  parseClusterKeys,
  readClusterKeys,
  SIGNATURE_HEADER,
  statusSignedBytes,
  warnIfUnsigned,
  type RecordSigner,
  type SignedKind,
} from "./record-signer.ts";
export { checkKafkaCertificates, KafkaCertificateError } from "./kafka-tls-check.ts";
export {
  createBatchingProducer,
  ProduceStuckError,
  ProducerClosedError,
  ProducerNotConnectedError,
  RecordWithdrawnError,
  type BatchingProducer,
  type RecordPosition,
} from "./batching-producer.ts";
export { vectorsToBytes, bytesToVectors } from "./vectors.ts";
export {
  loadCatalog,
  CatalogError,
  parseByteSize,
  type Catalog,
  type CatalogModel,
  type ModelBatching,
  type PoolSpec,
  type IntakeKind,
  type JobTopicLayout,
  INTAKE_KINDS,
  JOB_TOPIC_LAYOUTS,
} from "./catalog.ts";
export { SESSION_OVERHEAD_BYTES, sessionBytesOfFile } from "./model-size.ts";
export { readModelDir, readModelManifest, specOfManifest, ModelLoadError, type ModelSpec, type ModelTask } from "./model-manifest.ts";
export { DEFAULT_ZERO_SHOT_TEMPERATURE, type CompositeScoring, type ZeroShotLabel } from "./composite-model.ts";
export { Attr, SpanName } from "./telemetry/attributes.ts";
export { startTracing, shoalTracer, traceHeaders, contextFromHeaders, type Tracing } from "./telemetry/tracing.ts";
export { startProcessSpan, startSendSpan, type ConsumedRecord } from "./telemetry/kafka-spans.ts";
export { createMetricsRegistry, Counter, Gauge, Histogram, type Registry } from "./telemetry/metrics.ts";
export { boundLabel, OTHER_LABEL } from "./telemetry/label-bound.ts";
export { createKafkaProbe, type KafkaProbe, type ProbeCheck } from "./telemetry/kafka-probe.ts";
export { eachRecordInSlices, RECORD_SLICE } from "./sliced-batch.ts";
export { createResilientConsumer, SOLO_GROUP_CONSUMER, type ResilientConsumer, type ResilientConsumerOptions } from "./resilient-consumer.ts";
export { runService, stopSteps, forceExitAfterMs, type RunServiceOptions, type ServiceApp } from "./run-service.ts";
export {
  directRouter,
  leastLoaded,
  mix32,
  partitioned,
  powerOfTwo,
  roundRobin,
  sharedQueue,
  type DeviceLoad,
  type DispatchPolicy,
  type LeastLoadedOptions,
  type LoadMetric,
  type Router,
  type RoutedJob,
} from "./dispatch-policies.ts";
export { stopKafkajsIdleLoop } from "./kafkajs-idle-loop.ts";
export { useNativeKafkajsCrc } from "./kafkajs-native-crc.ts";
export { fetchHubModel, type FetchHubModelOptions, type HubModel } from "./hub/fetch-hub-model.ts";
export { DEFAULT_REVISION, formatHubSource, parseModelSource, type ModelSource } from "./hub/model-source.ts";
export { DEFAULT_ONNX_FILE, SHOAL_MODEL_CONFIG_FILES, shoalModelFiles, type HubFileSelection } from "./hub/files.ts";
export { DEFAULT_HF_ENDPOINT, readHubSettings, type HubSettings } from "./hub/settings.ts";
export { repoFolderName } from "./hub/cache.ts";
export type { HubProgress } from "./hub/download.ts";
export { createProgressPrinter, formatBytes, formatHubProgress } from "./hub/progress.ts";
export {
  HubDownloadError,
  HubEntryNotFoundError,
  HubError,
  HubGatedError,
  HubOfflineMissError,
  HubRepoNotFoundError,
  HubRevisionNotFoundError,
  HubUnavailableError,
  ModelSourceError,
} from "./hub/errors.ts";
export {
  createModelRegistry,
  readRegistryTopic,
  REGISTRY_TOPIC,
  registryTopicSpec,
  type ModelRegistry,
  type ModelRegistryOptions,
} from "./registry/model-registry.ts";
export {
  aliasKey,
  aliasRecordValue,
  modelKey,
  modelRecordValue,
  REGISTRY_NAME,
  RegistryState,
  type RegistryRefusal,
} from "./registry/registry-state.ts";
export { batchingOf } from "./registry/registry-models.ts";
export { modelIdentity } from "./registry/model-identity.ts";
export {
  createSourceResolver,
  folderRevision,
  resolveFolderSource,
  SourceRefusedError,
  type SourceRefusal,
  type ModelSourceResolver,
  type ResolvedSource,
  type ResolveOptions,
} from "./registry/model-source.ts";
export { createHubSourceResolver, type HubSourceOptions } from "./registry/hub-source.ts";
export { KAFKA_44, BROKER_LIMIT_NAMES, GROUP_LIMIT_NAMES, type KafkaLimit, type LimitScope } from "./capacity/kafka-limits.ts";
export {
  ACCELERATOR_DEFAULTS,
  capacityReport,
  deviceFigures,
  membersPerWorker,
  shardModels,
  splitWorkers,
  type CapacityInput,
  type CapacityReport,
  type DeviceFigures,
  type FleetModel,
  type GroupFigures,
  type TopicLayout,
} from "./capacity/capacity-model.ts";
export {
  bindingLimit,
  DEFAULT_LIMIT_SETTINGS,
  fitConfiguration,
  limitUses,
  type CapacityFit,
  type FitOptions,
  type LimitSettings,
  type LimitUse,
} from "./capacity/capacity-fit.ts";
export { checkPoolLimits, limitsFromConfigs, poolNeeds, type LimitWarning, type PoolLimits, type PoolNeeds, type PoolShape } from "./capacity/limit-check.ts";
export {
  createPoolLimitMonitor,
  shareLimitsReader,
  type PoolLimitMonitor,
  type PoolLimitMonitorOptions,
  type ShareAdminCalls,
  type ShareLimitsReader,
} from "./capacity/pool-limits-monitor.ts";
