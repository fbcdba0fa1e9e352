/**
 * Share-group configuration through IncrementalAlterConfigs on resource type GROUP (32), the way
 * `kafka-configs --entity-type groups` does it. Group configs may be set before the group exists,
 * so a worker can set its own group up before its first heartbeat.
 */
import type { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { incrementalAlterConfigsApi } from "./generated/incremental-alter-configs.ts";
import { call } from "./protocol/call.ts";

/** The share-group settings a consumer usually wants to own. Unset fields are left as they are. */
export interface ShareGroupConfig {
  /**
   * Where a new share group starts: "earliest" or "latest" (the broker's default, which skips
   * everything written before the first member joined), or "by_duration:<ISO-8601 duration>".
   */
  readonly autoOffsetReset?: "earliest" | "latest" | `by_duration:${string}`;
  /** share.record.lock.duration.ms: how long a delivered record stays locked to its member. */
  readonly recordLockDurationMs?: number;
  /** share.delivery.count.limit: deliveries before a record is archived (2–10 by default). */
  readonly deliveryCountLimit?: number;
  /** share.partition.max.record.locks: acquired records per partition across the group. */
  readonly partitionMaxRecordLocks?: number;
}

const RESOURCE_TYPE_GROUP = 32;
const OP_SET = 0;

/** The group config names behind {@link ShareGroupConfig}'s fields. */
export function shareGroupConfigEntries(config: ShareGroupConfig): Array<[string, string]> {
  const entries: Array<[string, string | number | undefined]> = [
    ["share.auto.offset.reset", config.autoOffsetReset],
    ["share.record.lock.duration.ms", config.recordLockDurationMs],
    ["share.delivery.count.limit", config.deliveryCountLimit],
    ["share.partition.max.record.locks", config.partitionMaxRecordLocks],
  ];
  return entries.filter((e): e is [string, string | number] => e[1] !== undefined).map(([k, v]) => [k, String(v)]);
}

/** Sets share-group configs over an existing cluster view (any broker forwards to the controller). */
export async function applyShareGroupConfig(cluster: Cluster, groupId: string, config: ShareGroupConfig): Promise<void> {
  const configs = shareGroupConfigEntries(config);
  if (configs.length === 0) return;
  const nodeId = await cluster.findCoordinator(groupId);
  const conn = await cluster.connection(nodeId, "coordinator");
  const res = await call(conn, incrementalAlterConfigsApi, 1, {
    resources: [
      {
        resourceType: RESOURCE_TYPE_GROUP,
        resourceName: groupId,
        configs: configs.map(([name, value]) => ({ name, configOperation: OP_SET, value })),
      },
    ],
    validateOnly: false,
  });
  for (const r of res.responses) {
    if (r.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError("IncrementalAlterConfigs", r.errorCode, r.errorMessage);
  }
}
