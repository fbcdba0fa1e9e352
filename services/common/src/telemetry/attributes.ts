/**
 * Every span attribute Shoal sets, in one place. Standard names follow the OpenTelemetry
 * semantic conventions (rpc.*, http.*, url.*, messaging.*); Shoal's own carry the `shoal.` prefix.
 */
export const Attr = {
  // OpenTelemetry semantic conventions
  RPC_SYSTEM: "rpc.system",
  RPC_SERVICE: "rpc.service",
  RPC_METHOD: "rpc.method",
  RPC_GRPC_STATUS_CODE: "rpc.grpc.status_code",
  RPC_CONNECT_ERROR_CODE: "rpc.connect_rpc.error_code",
  HTTP_REQUEST_METHOD: "http.request.method",
  HTTP_REQUEST_METHOD_ORIGINAL: "http.request.method_original",
  HTTP_RESPONSE_STATUS_CODE: "http.response.status_code",
  HTTP_ROUTE: "http.route",
  URL_PATH: "url.path",
  URL_SCHEME: "url.scheme",
  NETWORK_PROTOCOL_VERSION: "network.protocol.version",
  USER_AGENT: "user_agent.original",
  ERROR_TYPE: "error.type",
  MESSAGING_SYSTEM: "messaging.system",
  MESSAGING_DESTINATION: "messaging.destination.name",
  MESSAGING_OPERATION_TYPE: "messaging.operation.type",
  MESSAGING_OPERATION_NAME: "messaging.operation.name",
  MESSAGING_MESSAGE_ID: "messaging.message.id",
  MESSAGING_PARTITION: "messaging.destination.partition.id",
  MESSAGING_KAFKA_OFFSET: "messaging.kafka.offset",
  MESSAGING_CONSUMER_GROUP: "messaging.consumer.group.name",
  MESSAGING_BATCH_COUNT: "messaging.batch.message_count",
  // Shoal
  /** How a result reached its gateway: `direct` (handed straight to it); absent: its reply topic. */
  REPLY_VIA: "shoal.reply.via",
  JOB_ID: "shoal.job.id",
  JOB_STATUS: "shoal.job.status",
  JOB_ATTEMPT: "shoal.job.attempt",
  MODEL: "shoal.model",
  LANE: "shoal.lane",
  INPUTS: "shoal.inputs",
  WORKER_ID: "shoal.worker.id",
  GATEWAY_INSTANCE: "shoal.gateway.instance",
  /** The API key's tenant (from configuration, so bounded). */
  TENANT: "shoal.tenant",
  BATCH_ITEMS: "shoal.batch.items",
  BATCH_JOBS: "shoal.batch.jobs",
  BATCH_TOKENS: "shoal.batch.tokens",
  BATCH_PADDED_TOKENS: "shoal.batch.padded_tokens",
  BATCH_CALLS: "shoal.batch.calls",
  BATCH_CLOSE_REASON: "shoal.batch.close_reason",
  TOKENS: "shoal.tokens",
} as const;

/** Span names Shoal uses besides the conventional `<operation> <destination>` ones. */
export const SpanName = {
  QUEUE_WAIT: "shoal.queue_wait",
  TOKENIZE: "shoal.tokenize",
  BATCH: "shoal.batch",
  INFERENCE: "shoal.inference",
} as const;
