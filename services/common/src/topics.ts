import type { Admin, ITopicConfig } from "kafkajs";
import { laneJobTopics, SERVED_LANES, type PoolLayout } from "./lanes.ts";
import type { SignedKind } from "./record-signer.ts";

/**
 * What a record on `topic` is, for its signature (record-signer.ts): jobs, retry and dead-letter
 * topics carry jobs, reply topics results, cancel topics cancels; anything else is not signed.
 */
export function signedKindOf(topic: string): SignedKind | undefined {
  if (/^shoal\.(jobs|retry|dead)\./.test(topic)) return "job";
  if (topic.startsWith("shoal.replies.")) return "result";
  if (topic.startsWith("shoal.cancel.")) return "cancel";
  return undefined;
}

/**
 * Header of a wake-up marker on a share pool's jobs topic: a record with no job in it, which a
 * worker writes after giving a job back, because on Kafka 4.4 a release does not complete a
 * ShareFetch already waiting at the broker while a new record does
 * (`e2e/kafka-share/acknowledgements.test.ts`). The woken fetch takes the given-back job first
 * (the lowest offset); whoever takes the marker acknowledges it and runs nothing.
 */
export const WAKE_HEADER = "shoal-wake";

/** Cancel topic of one pool: `shoal.cancel.<pool>`, read by every worker of the pool. */
export function cancelTopic(pool: string): string {
  return `shoal.cancel.${pool}`;
}

/**
 * Retry topic of one pool: `shoal.retry.<pool>`. A job whose run failed is written here again
 * with its attempt count raised (never retried in place), and read by the pool's workers like
 * the jobs topics; a retried job runs alone, so a poison input cannot fail its neighbours again.
 */
export function retryTopic(pool: string): string {
  return `shoal.retry.${pool}`;
}

/**
 * Dead-letter topic of one pool: `shoal.dead.<pool>`. Jobs that failed every attempt, and records
 * that are not jobs at all, land here with the reason in their headers, for an operator to read.
 */
export function deadLetterTopic(pool: string): string {
  return `shoal.dead.${pool}`;
}

/** Reply topic owned by one gateway instance: `shoal.replies.<instanceId>`. */
export function replyTopic(instanceId: string): string {
  return `shoal.replies.${instanceId}`;
}

/**
 * Where workers publish their WorkerStatus, keyed by worker id; compacted, so a gateway that
 * starts reads the latest status of every worker (a tombstone removes one that left cleanly).
 */
export const STATUS_TOPIC = "shoal.status";

/**
 * Where gateways register their reply topics (`GatewayRegistration`), keyed by instance id;
 * compacted, so a worker that starts reads every live gateway's latest registration.
 */
export const GATEWAYS_TOPIC = "shoal.gateways";

/** A topic the project needs, with its explicit partition count. */
export interface TopicSpec {
  readonly topic: string;
  readonly partitions: number;
  readonly config?: Readonly<Record<string, string>>;
}

/**
 * A compacted state topic's config (the model registry's, the Batch API's state): small segments
 * so compaction keeps up, and a tombstone kept a day so every follower sees a removal.
 */
export const COMPACTED_STATE_CONFIG: Readonly<Record<string, string>> = {
  "cleanup.policy": "compact",
  "segment.ms": String(10 * 60_000),
  "min.cleanable.dirty.ratio": "0.2",
  "delete.retention.ms": String(24 * 3_600_000),
};

/**
 * Creates the topics that do not exist yet (idempotent, safe to race between replicas:
 * kafkajs reports an existing topic as "not created", not as an error).
 */
export async function ensureTopics(admin: Admin, specs: readonly TopicSpec[]): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing: ITopicConfig[] = specs
    .filter((s) => !existing.has(s.topic))
    .map((s) => ({
      topic: s.topic,
      numPartitions: s.partitions,
      replicationFactor: -1,
      configEntries: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
    }));
  if (missing.length === 0) return;
  try {
    await admin.createTopics({ topics: missing, waitForLeaders: true });
  } catch (err) {
    // Another replica created it between listTopics and createTopics. Or, on a multi-broker
    // cluster, the broker kafkajs then asked for the leaders had not applied the new topics yet:
    // kafkajs waits out LEADER_NOT_AVAILABLE only, not UNKNOWN_TOPIC_OR_PARTITION (kafkajs#1222).
    if (!(err instanceof Error && /already exists|does not host this topic-partition/i.test(err.message))) throw err;
  }
  await settleNewTopics(
    admin,
    missing.map((t) => t.topic),
  );
}

/**
 * On a multi-broker (KRaft) cluster each broker applies the controller's new topics on its own
 * schedule, and a kafkajs client that asks a broker which has not yet gives up at once with
 * UNKNOWN_TOPIC_OR_PARTITION (a consumer's subscribe, right after this, was seen to fail a
 * service's start that way; kafkajs#815). So: wait until the topics have leaders, then give the
 * other brokers a moment. A single broker needs no wait.
 */
async function settleNewTopics(admin: Admin, topics: readonly string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let last: unknown;
    try {
      const found = (await admin.fetchTopicMetadata({ topics: [...topics] })).topics;
      if (found.length === topics.length && found.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) break;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`topics ${topics.join(", ")} have no leaders after ${timeoutMs} ms${last instanceof Error ? `: ${last.message}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if ((await admin.describeCluster()).brokers.length > 1) await new Promise((r) => setTimeout(r, NEW_TOPIC_SETTLE_MS));
}

/** How long the other brokers of a multi-broker cluster get to learn new topics (see settleNewTopics). */
const NEW_TOPIC_SETTLE_MS = 1_000;

/** Largest record a jobs or reply topic accepts (a request's texts, or a result's vectors). */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/** The topics of a pool: its jobs topics (per lane, or per model and lane) and its retry topic (the pool's partition count), its dead-letter and cancel topics. */
export function poolTopicSpecs(pool: PoolLayout & { partitions: number }): TopicSpec[] {
  return [
    ...SERVED_LANES.flatMap((lane) =>
      laneJobTopics(pool, lane).map(({ topic }) => ({
        topic,
        partitions: pool.partitions,
        config: { "max.message.bytes": String(MAX_RECORD_BYTES) },
      })),
    ),
    { topic: retryTopic(pool.name), partitions: pool.partitions, config: { "max.message.bytes": String(MAX_RECORD_BYTES) } },
    // Dead letters wait for an operator: a week.
    { topic: deadLetterTopic(pool.name), partitions: 1, config: { "max.message.bytes": String(MAX_RECORD_BYTES), "retention.ms": String(7 * 24 * 3_600_000) } },
    // Cancels matter for at most a request's lifetime.
    { topic: cancelTopic(pool.name), partitions: 1, config: { "retention.ms": String(15 * 60_000) } },
  ];
}

/** The cluster's status topic (one partition: a few records per worker every few seconds). */
export const statusTopicSpec: TopicSpec = {
  topic: STATUS_TOPIC,
  partitions: 1,
  config: { "cleanup.policy": "compact", "segment.ms": String(10 * 60_000), "min.cleanable.dirty.ratio": "0.2", "delete.retention.ms": String(60_000) },
};

/** The gateways' registration topic (one partition: one record per gateway every few seconds). */
export const gatewaysTopicSpec: TopicSpec = { ...statusTopicSpec, topic: GATEWAYS_TOPIC };
