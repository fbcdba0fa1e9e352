/**
 * Operator calls that need no membership: set a share group's configs, describe a share group.
 * Each opens its own short-lived connections.
 */
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { shareGroupDescribeApi } from "./generated/share-group-describe.ts";
import { applyShareGroupConfig, type ShareGroupConfig } from "./group-config.ts";
import { call } from "./protocol/call.ts";
import type { TopicPartition } from "./types.ts";

export interface AdminOptions {
  readonly brokers: readonly string[];
  readonly clientId?: string;
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

async function withCluster<T>(opts: AdminOptions, fn: (cluster: Cluster) => Promise<T>): Promise<T> {
  const cluster = new Cluster({ brokers: opts.brokers, clientId: opts.clientId ?? "kafka-share-admin", connectTimeoutMs: 5_000, requestTimeoutMs: 10_000 });
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
