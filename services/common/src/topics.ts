import type { Admin, ITopicConfig } from "kafkajs";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";

/** Lanes that have topics; LANE_UNSPECIFIED is resolved before a job is produced. */
export type ServedLane = Lane.INTERACTIVE | Lane.BATCH;

const laneNames: Record<ServedLane, string> = {
  [Lane.INTERACTIVE]: "interactive",
  [Lane.BATCH]: "batch",
};

/** Jobs topic of one pool and lane: `shoal.jobs.<pool>.<lane>`. */
export function jobsTopic(pool: string, lane: ServedLane): string {
  return `shoal.jobs.${pool}.${laneNames[lane]}`;
}

/** Cancel topic of one pool: `shoal.cancel.<pool>`, read by every worker of the pool. */
export function cancelTopic(pool: string): string {
  return `shoal.cancel.${pool}`;
}

/** Reply topic owned by one gateway instance: `shoal.replies.<instanceId>`. */
export function replyTopic(instanceId: string): string {
  return `shoal.replies.${instanceId}`;
}

/** A topic the project needs, with its explicit partition count. */
export interface TopicSpec {
  readonly topic: string;
  readonly partitions: number;
  readonly config?: Readonly<Record<string, string>>;
}

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
    // Another replica created it between listTopics and createTopics.
    if (!(err instanceof Error && /already exists/i.test(err.message))) throw err;
  }
}

/** Largest record a jobs or reply topic accepts (a request's texts, or a result's vectors). */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/** The topics of a pool: a jobs topic per lane (the pool's partition count) and its cancel topic. */
export function poolTopicSpecs(pool: { name: string; partitions: number }): TopicSpec[] {
  const lanes: ServedLane[] = [Lane.INTERACTIVE, Lane.BATCH];
  return [
    ...lanes.map((lane) => ({
      topic: jobsTopic(pool.name, lane),
      partitions: pool.partitions,
      config: { "max.message.bytes": String(MAX_RECORD_BYTES) },
    })),
    // Cancels matter for at most a request's lifetime.
    { topic: cancelTopic(pool.name), partitions: 1, config: { "retention.ms": String(15 * 60_000) } },
  ];
}
