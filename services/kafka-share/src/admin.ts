/**
 * Operator calls that need no membership: set a share group's configs, describe a share group and
 * its offsets (where each partition's queue starts, and how many records wait).
 * Each opens its own short-lived connections.
 */
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { describeShareGroupOffsetsApi } from "./generated/describe-share-group-offsets.ts";
import { shareGroupDescribeApi } from "./generated/share-group-describe.ts";
import { applyShareGroupConfig, type ShareGroupConfig } from "./group-config.ts";
import { call } from "./protocol/call.ts";
import type { KafkaSecurityOptions } from "./security.ts";
import type { TopicPartition } from "./types.ts";

export interface AdminOptions {
  readonly brokers: readonly string[];
  readonly clientId?: string;
  /** TLS and SASL, as for the consumer. */
  readonly security?: KafkaSecurityOptions;
}

/** A share group as its coordinator describes it. */
export interface ShareGroupDescription {
  readonly groupId: string;
  /** "Empty", "Stable", "Dead", ... ("Dead" for a group that does not exist). */
  readonly state: string;
  readonly groupEpoch: number;
  readonly members: ReadonlyArray<{
    readonly memberId: string;
    readonly clientId: string;
    readonly memberEpoch: number;
    readonly subscribedTopics: readonly string[];
    readonly assignment: readonly TopicPartition[];
  }>;
}

/** One partition of a share group, as DescribeShareGroupOffsets reports it. */
export interface ShareGroupPartitionOffsets {
  readonly topic: string;
  readonly partition: number;
  /**
   * The share-partition start offset (SPSO): every record below it is done (accepted, rejected or
   * archived); records from here on are available, acquired or already acknowledged. -1 when the
   * group has no state for the partition yet (no member ever fetched from it).
   */
  readonly startOffset: bigint;
  readonly leaderEpoch: number;
  /**
   * Records waiting (KIP-1226, DescribeShareGroupOffsets v1): from the start offset to the high
   * watermark, less the records already acknowledged in between. Records a member holds under an
   * acquisition lock still count (they are not done). Absent from a v0 broker, or when the broker
   * could not compute it (-1 on the wire).
   */
  readonly lag?: bigint;
}

function newCluster(opts: AdminOptions): Cluster {
  return new Cluster({
    brokers: opts.brokers,
    clientId: opts.clientId ?? "kafka-share-admin",
    connectTimeoutMs: 5_000,
    requestTimeoutMs: 10_000,
    ...(opts.security ? { security: opts.security } : {}),
  });
}

async function withCluster<T>(opts: AdminOptions, fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = newCluster(opts);
  try {
    return await fn(cluster);
  } finally {
    await cluster.close();
  }
}

/**
 * Sets a share group's configs (IncrementalAlterConfigs, resource type GROUP). Consumers can pass
 * `groupConfig` instead; this is the operator's way, like `kafka.sh share-group-config`.
 *
 * @example await alterShareGroupConfig({ brokers: ["127.0.0.1:9092"] }, "jobs",
 *   { autoOffsetReset: "earliest", recordLockDurationMs: 5_000 });
 */
export function alterShareGroupConfig(opts: AdminOptions, groupId: string, config: ShareGroupConfig): Promise<void> {
  return withCluster(opts, (cluster) => applyShareGroupConfig(cluster, groupId, config));
}

/** Describes a share group (ShareGroupDescribe v1 at its coordinator). */
export function describeShareGroup(opts: AdminOptions, groupId: string): Promise<ShareGroupDescription> {
  return withCluster(opts, async (cluster) => {
    const nodeId = await cluster.findCoordinator(groupId);
    const conn = await cluster.connection(nodeId, "coordinator");
    const res = await call(conn, shareGroupDescribeApi, 1, { groupIds: [groupId], includeAuthorizedOperations: false });
    const g = res.groups[0];
    if (!g) throw new KafkaProtocolError("ShareGroupDescribe", -1, "empty response");
    // A group that never existed answers GROUP_ID_NOT_FOUND (69): describe it as Dead, like Kafka's tools.
    if (g.errorCode === 69) return { groupId, state: "Dead", groupEpoch: -1, members: [] };
    if (g.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError("ShareGroupDescribe", g.errorCode, g.errorMessage);
    return {
      groupId: g.groupId,
      state: g.groupState,
      groupEpoch: g.groupEpoch,
      members: g.members.map((m) => ({
        memberId: m.memberId,
        clientId: m.clientId,
        memberEpoch: m.memberEpoch,
        subscribedTopics: m.subscribedTopicNames,
        assignment: m.assignment.topicPartitions.flatMap((tp) => tp.partitions.map((partition) => ({ topic: tp.topicName, partition }))),
      })),
    };
  });
}

/**
 * Describes a share group's offsets (DescribeShareGroupOffsets v1, v0 where the coordinator has no
 * more): per topic partition, the share-partition start offset and the lag. Without `topics`, every
 * topic partition the group has state for; with them, those topics' partitions (from Metadata),
 * start offset -1 and no lag where the group has no state yet. A group that does not exist answers
 * an empty list without `topics`. Opens and closes its own connections: a poller wants
 * {@link createShareGroupAdmin}.
 *
 * @example const parts = await describeShareGroupOffsets({ brokers }, "shoal-pool-default", ["jobs"]);
 *   const waiting = parts.reduce((n, p) => n + (p.lag ?? 0n), 0n);
 */
export function describeShareGroupOffsets(opts: AdminOptions, groupId: string, topics?: readonly string[]): Promise<ShareGroupPartitionOffsets[]> {
  return withCluster(opts, (cluster) => describeOffsets(cluster, groupId, topics));
}

/** Admin calls over connections kept open between calls (reopened after a broker restart). */
export interface ShareGroupAdmin {
  /** {@link describeShareGroupOffsets} on this admin's connections. */
  describeShareGroupOffsets(groupId: string, topics?: readonly string[]): Promise<ShareGroupPartitionOffsets[]>;
  close(): Promise<void>;
}

/**
 * An admin client that keeps its connections, for callers that ask every second (the gateway's
 * lag monitor). A failed call drops the connections it used, so the next one starts afresh.
 */
export function createShareGroupAdmin(opts: AdminOptions): ShareGroupAdmin {
  let cluster = newCluster(opts);
  return {
    async describeShareGroupOffsets(groupId, topics) {
      const used = cluster;
      try {
        return await describeOffsets(used, groupId, topics);
      } catch (err) {
        if (cluster === used) {
          cluster = newCluster(opts);
          await used.close(true).catch(() => {});
        }
        throw err;
      }
    },
    close: () => cluster.close(),
  };
}

async function describeOffsets(cluster: Cluster, groupId: string, topics?: readonly string[]): Promise<ShareGroupPartitionOffsets[]> {
  let request: Array<{ topicName: string; partitions: number[] }> | null = null;
  if (topics) {
    await cluster.refreshMetadata(topics);
    request = topics.map((name) => {
      const info = cluster.topicByName(name);
      if (!info) throw new KafkaProtocolError("Metadata", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name);
      return { topicName: name, partitions: [...info.leaders.keys()].sort((a, b) => a - b) };
    });
  }
  const nodeId = await cluster.findCoordinator(groupId);
  const range = (await cluster.apiVersions(nodeId)).get(describeShareGroupOffsetsApi.apiKey);
  if (!range) throw new KafkaProtocolError("DescribeShareGroupOffsets", 35, "the coordinator does not support it (share groups off?)");
  const version = Math.min(range.max, describeShareGroupOffsetsApi.maxVersion); // v0 decodes Lag as -1
  const conn = await cluster.connection(nodeId, "coordinator");
  const res = await call(conn, describeShareGroupOffsetsApi, version, { groups: [{ groupId, topics: request }] });
  const g = res.groups[0];
  if (!g) throw new KafkaProtocolError("DescribeShareGroupOffsets", -1, "empty response");
  if (g.errorCode === 69) return []; // GROUP_ID_NOT_FOUND: nothing was ever read
  if (g.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError("DescribeShareGroupOffsets", g.errorCode, g.errorMessage);
  const out: ShareGroupPartitionOffsets[] = [];
  for (const t of g.topics) {
    for (const p of t.partitions) {
      if (p.errorCode !== ErrorCode.NONE)
        throw new KafkaProtocolError(
          "DescribeShareGroupOffsets",
          p.errorCode,
          `${t.topicName}-${p.partitionIndex}${p.errorMessage ? `: ${p.errorMessage}` : ""}`,
        );
      out.push({
        topic: t.topicName,
        partition: p.partitionIndex,
        startOffset: p.startOffset,
        leaderEpoch: p.leaderEpoch,
        ...(p.lag !== undefined && p.lag >= 0n ? { lag: p.lag } : {}),
      });
    }
  }
  return out.sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));
}
