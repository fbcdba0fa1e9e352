/**
 * Kafka 4.4's settings that bound one share pool (issue #53), as the broker itself declares them:
 * read with `javap -constants` (names, defaults) and `javap -c` (the ConfigDef ranges in the static
 * initialisers) from the 4.4.0 jars, `kafka-group-coordinator-4.4.0.jar` and
 * `kafka-share-coordinator-4.4.0.jar`. `source` names the class and constant each came from.
 */

/** Where a setting is changed: the brokers' server.properties, or the share group's own config. */
export type LimitScope = "broker" | "group";

/** One setting, its Kafka 4.4 default and the range Kafka accepts for it. */
export interface KafkaLimit {
  readonly name: string;
  readonly scope: LimitScope;
  readonly default: number;
  /** Smallest accepted value. */
  readonly min: number;
  /** Largest accepted value; undefined where Kafka sets none. */
  readonly max: number | undefined;
  /** The class and constant it was read from. */
  readonly source: string;
  /** What it bounds, in a sentence. */
  readonly bounds: string;
}

const GCC = "org.apache.kafka.coordinator.group.GroupCoordinatorConfig";
const SGC = "org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig";
const GC = "org.apache.kafka.coordinator.group.GroupConfig";
const SCC = "org.apache.kafka.coordinator.share.ShareCoordinatorConfig";

/** Kafka 4.4.0's share-group limits and the timings that set the brokers' load. */
export const KAFKA_44 = {
  maxGroupSize: {
    name: "group.share.max.size",
    scope: "broker",
    default: 200,
    min: 1,
    max: 1_000,
    source: `${GCC}.SHARE_GROUP_MAX_SIZE_CONFIG (Range.between(1, 1000))`,
    bounds: "members in one share group; a member past it is refused (GROUP_MAX_SIZE_REACHED)",
  },
  maxShareSessions: {
    name: "group.share.max.share.sessions",
    scope: "broker",
    default: 2_000,
    min: 1,
    max: undefined,
    source: `${SGC}.SHARE_GROUP_MAX_SHARE_SESSIONS_CONFIG (Range.atLeast(1))`,
    bounds: "share sessions per broker, one per (group, member) that fetches from it (ShareSessionCache, keyed by ShareSessionKey(groupId, memberId))",
  },
  partitionMaxRecordLocks: {
    name: "group.share.partition.max.record.locks",
    scope: "broker",
    default: 2_000,
    min: 100,
    max: 10_000,
    source: `${SGC}.SHARE_GROUP_PARTITION_MAX_RECORD_LOCKS_CONFIG (Range.between(100, 10000))`,
    bounds: "records acquired and not yet acknowledged on one share-partition: the default of the group setting below",
  },
  groupPartitionMaxRecordLocks: {
    name: "share.partition.max.record.locks",
    scope: "group",
    default: 2_000,
    min: 100,
    max: 4_000,
    source: `${GC}.SHARE_PARTITION_MAX_RECORD_LOCKS_CONFIG, bounded by ${SGC}.SHARE_GROUP_MIN/MAX_PARTITION_MAX_RECORD_LOCKS_CONFIG`,
    bounds: "the same, for one share group (kafka-configs --entity-type groups); past it the broker acquires nothing more",
  },
  maxPartitionMaxRecordLocks: {
    name: "group.share.max.partition.max.record.locks",
    scope: "broker",
    default: 4_000,
    min: 2_000,
    max: 10_000,
    source: `${SGC}.SHARE_GROUP_MAX_PARTITION_MAX_RECORD_LOCKS_CONFIG (Range.between(2000, 10000))`,
    bounds: "the most a group's share.partition.max.record.locks may be set to",
  },
  heartbeatIntervalMs: {
    name: "group.share.heartbeat.interval.ms",
    scope: "broker",
    default: 5_000,
    min: 5_000,
    max: 15_000,
    source: `${GCC}.SHARE_GROUP_HEARTBEAT_INTERVAL_MS_CONFIG (group.share.min/max.heartbeat.interval.ms: 5000, 15000)`,
    bounds: "how often each member heartbeats to its group's coordinator",
  },
  sessionTimeoutMs: {
    name: "group.share.session.timeout.ms",
    scope: "broker",
    default: 45_000,
    min: 45_000,
    max: 60_000,
    source: `${GCC}.SHARE_GROUP_SESSION_TIMEOUT_MS_CONFIG (group.share.min/max.session.timeout.ms: 45000, 60000)`,
    bounds: "how long a silent member keeps its place (and its locks until they time out)",
  },
  recordLockDurationMs: {
    name: "group.share.record.lock.duration.ms",
    scope: "broker",
    default: 30_000,
    min: 15_000,
    max: 60_000,
    source: `${SGC}.SHARE_GROUP_RECORD_LOCK_DURATION_MS_CONFIG (group.share.min/max.record.lock.duration.ms: 15000, 60000)`,
    bounds: "how long an acquired record stays locked to its member",
  },
  deliveryCountLimit: {
    name: "group.share.delivery.count.limit",
    scope: "broker",
    default: 5,
    min: 2,
    max: 10,
    source: `${SGC}.SHARE_GROUP_DELIVERY_COUNT_LIMIT_CONFIG (Range.between(2, 10))`,
    bounds: "deliveries before a record is archived",
  },
  shareCoordinatorThreads: {
    name: "share.coordinator.threads",
    scope: "broker",
    default: 1,
    min: 1,
    max: undefined,
    source: `${SCC}.NUM_THREADS_CONFIG`,
    bounds: "threads that write every share-partition's state (one write per acknowledging request per partition)",
  },
} as const satisfies Record<string, KafkaLimit>;

/** The broker settings a pool's limit check reads (describeBrokerConfigs). */
export const BROKER_LIMIT_NAMES: readonly string[] = [
  KAFKA_44.maxGroupSize.name,
  KAFKA_44.maxShareSessions.name,
  KAFKA_44.partitionMaxRecordLocks.name,
  KAFKA_44.maxPartitionMaxRecordLocks.name,
  KAFKA_44.heartbeatIntervalMs.name,
];

/** The group settings it reads (describeGroupConfigs). */
export const GROUP_LIMIT_NAMES: readonly string[] = [KAFKA_44.groupPartitionMaxRecordLocks.name];
