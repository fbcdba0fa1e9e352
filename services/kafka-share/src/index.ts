/**
 * @shoal/kafka-share: a Kafka share-group (KIP-932) consumer for Node.js.
 */
export { createShareConsumer } from "./consumer.ts";
export {
  alterShareGroupConfig,
  createShareGroupAdmin,
  describeShareGroup,
  describeShareGroupOffsets,
  type AdminOptions,
  type ShareGroupAdmin,
  type ShareGroupDescription,
  type ShareGroupPartitionOffsets,
} from "./admin.ts";
export { describeBrokerConfigs, describeGroupConfigs, type ConfigValue, type ConfigValues } from "./describe-configs.ts";
export { createBrokerPing, type BrokerPing, type BrokerPingOptions, type PingResult } from "./broker-ping.ts";
export type { ShareGroupConfig } from "./group-config.ts";
export { createLagReader, type LagReader, type LagReaderOptions, type QueueHead } from "./lag-reader.ts";
export { createRecordReader, type RecordReader, type RecordReaderOptions, type StoredRecord } from "./record-reader.ts";
export {
  AcknowledgeError,
  ConsumerClosedError,
  KafkaAuthenticationError,
  KafkaProtocolError,
  KafkaSecurityError,
  KafkaTlsError,
} from "./errors.ts";
export type { KafkaSaslOptions, KafkaSecurityOptions, KafkaTlsOptions, SecretSource } from "./security.ts";
export type { AcknowledgeResult } from "./fetcher.ts";
export type { ShareRecord } from "./records.ts";
export type {
  AcknowledgeType,
  FetchOptions,
  ShareConsumer,
  ShareConsumerEvents,
  ShareConsumerLogger,
  ShareConsumerMetrics,
  ShareConsumerOptions,
  TopicPartition,
} from "./types.ts";
