import type { Kafka } from "kafkajs";
import {
  laneJobTopics,
  retryTopic,
  routedTopic,
  SERVED_LANES,
  shareSecurity,
  type IntakeKind,
  type Logger,
  type PoolSpec,
  type TopicSpec,
} from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { WorkerConfig } from "../config.ts";
import type { WorkerMetrics } from "../telemetry/worker-metrics.ts";
import { combineIntakes } from "./combined-intake.ts";
import { createGroupIntake } from "./group-intake.ts";
import type { JobIntake } from "./intake.ts";
import { createShareIntake } from "./share-intake.ts";

export interface IntakeDeps {
  readonly kafka: Kafka;
  readonly config: WorkerConfig;
  readonly pool: PoolSpec;
  readonly metrics: WorkerMetrics;
  readonly logger: Logger;
  /** Writes a wake-up marker to a jobs topic's partition (share intake: after a job is given back). */
  readonly wake?: (topic: string, partition: number) => Promise<void>;
  /** Room of the routed intake (default: the handler's): a routed job has nowhere else to go. */
  readonly routedRoom?: () => number;
  /** Share intake: told how long each fetch that brought records took (SHOAL_TAKE_AHEAD_MS=auto). */
  readonly onFetched?: (ms: number) => void;
  /** Share intake: keep a job it would give back (this worker starts it within a take round trip). */
  readonly keepsHere?: () => boolean;
}

/** The consumer group (group intake) or share group (share intake) of a pool's workers. */
export const poolGroupId = (pool: string): string => `shoal-pool-${pool}`;

/** This worker's intake: the pool's choice in the catalog unless `SHOAL_INTAKE` overrides it. */
export function intakeKind(config: WorkerConfig, pool: PoolSpec): IntakeKind {
  return config.intake ?? pool.intake;
}

/** The consumer group of one worker's routed topics: it alone reads them. */
export const routedGroupId = (workerId: string): string => `shoal-routed-${workerId}`;

/** A worker's routed topics (SHOAL_ROUTED_INTAKE=1), one per lane; created by the worker at start. */
export function routedTopicSpecs(pool: string, workerId: string): TopicSpec[] {
  // One partition: one reader. Jobs nobody read within the hour are long past their deadline.
  return SERVED_LANES.map((lane) => ({ topic: routedTopic(pool, workerId, lane), partitions: 1, config: { "retention.ms": String(3_600_000) } }));
}

/**
 * Creates the intake a worker takes its pool's jobs through; with SHOAL_ROUTED_INTAKE=1 it also
 * reads the jobs a routing gateway sent to this worker alone.
 */
export function createIntake(deps: IntakeDeps): JobIntake {
  const pooled = createPoolIntake(deps);
  if (!deps.config.routedIntake) return pooled;
  const routed = createGroupIntake(deps.kafka, deps.logger, {
    groupId: routedGroupId(deps.config.workerId),
    topics: routedTopicSpecs(deps.pool.name, deps.config.workerId).map((t) => t.topic),
    sessionTimeoutMs: deps.config.sessionTimeoutMs,
    heartbeatIntervalMs: deps.config.heartbeatIntervalMs,
  });
  return combineIntakes(pooled, routed, deps.routedRoom);
}

function createPoolIntake(deps: IntakeDeps): JobIntake {
  const { config, pool } = deps;
  const groupId = poolGroupId(pool.name);
  if (intakeKind(config, pool) === "group") {
    return createGroupIntake(deps.kafka, deps.logger, {
      groupId,
      topics: [...SERVED_LANES.flatMap((lane) => laneJobTopics(pool, lane).map((t) => t.topic)), retryTopic(pool.name)],
      sessionTimeoutMs: config.sessionTimeoutMs,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      onLag: (topic, partition, lag) => deps.metrics.consumerLag.set({ topic, partition: String(partition) }, lag),
    });
  }
  const security = shareSecurity(config.kafka);
  return createShareIntake({
    brokers: config.kafka.brokers,
    ...(security ? { security } : {}),
    groupId,
    clientId: `shoal-worker-${config.workerId}`,
    // Interactive first, then retries, then the batch lane: each asked for with the room left.
    // A per-model pool has a topic per model and lane: one member each, one model at a time.
    topics: [
      ...laneJobTopics(pool, Lane.INTERACTIVE).map((t) => ({ ...t, lane: "interactive" as const })),
      { topic: retryTopic(pool.name), lane: "interactive" },
      ...laneJobTopics(pool, Lane.BATCH).map((t) => ({ ...t, lane: "batch" as const })),
    ],
    lockMs: config.shareLockMs,
    deliveryLimit: config.shareDeliveryLimit,
    idleWaitMs: config.shareIdleWaitMs,
    idleJitter: config.shareIdleJitter,
    headsMaxAgeMs: config.shareHeadsMs,
    ackLingerMs: config.shareAckLingerMs,
    giveBackRestMs: config.shareGiveBackRestMs,
    giveBacks: config.shareGiveBacks,
    onGiveBack: (why) => deps.metrics.shareGivenBack.inc({ why }),
    ...(deps.onFetched ? { onFetched: deps.onFetched } : {}),
    ...(deps.keepsHere ? { keepsHere: deps.keepsHere } : {}),
    ...(deps.wake && config.shareWake ? { wake: deps.wake } : {}),
    logger: deps.logger,
  });
}
