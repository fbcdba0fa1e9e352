import {
  createPoolLimitMonitor,
  shareLimitsReader,
  shareSecurity,
  SERVED_LANES,
  type Logger,
  type PoolLimitMonitor,
  type PoolSpec,
  type Registry,
} from "@shoal/common";
import { describeBrokerConfigs, describeGroupConfigs, describeShareGroup, type AdminOptions } from "@shoal/kafka-share";
import type { WorkerConfig } from "../config.ts";
import { intakeKind, poolGroupId } from "../intake/create-intake.ts";

/** How long a worker's start waits for the limit check (it only warns: a slow read must not hold the start up). */
export const LIMIT_CHECK_WAIT_MS = 3_000;

/**
 * The worker's check of its pool against the brokers' share-group limits (issue #53): warns at start
 * when the pool cannot fit them and exports the limits beside the records this worker holds.
 * Undefined for a consumer-group pool (no share-group limits apply).
 */
export function createWorkerPoolLimits(
  config: WorkerConfig,
  pool: PoolSpec,
  registry: Registry,
  logger: Logger,
  held: () => number,
): PoolLimitMonitor | undefined {
  if (intakeKind(config, pool) !== "share") return undefined;
  const security = shareSecurity(config.kafka);
  const admin: AdminOptions = { brokers: config.kafka.brokers, clientId: `shoal-worker-${config.workerId}-limits`, ...(security ? { security } : {}) };
  return createPoolLimitMonitor({
    reader: shareLimitsReader({
      describeBrokerConfigs: (names) => describeBrokerConfigs(admin, names),
      describeGroupConfigs: (groupIds, names) => describeGroupConfigs(admin, groupIds, names),
      describeShareGroup: (groupId) => describeShareGroup(admin, groupId),
    }),
    pools: [
      {
        pool: pool.name,
        group: poolGroupId(pool.name),
        layout: pool.jobTopics,
        lanes: SERVED_LANES.length,
        models: pool.models.length,
        partitions: pool.partitions,
        ...(pool.workers !== undefined ? { declaredWorkers: pool.workers } : {}),
      },
    ],
    registry,
    logger,
    held: () => held(),
  });
}
