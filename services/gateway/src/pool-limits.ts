import { createPoolLimitMonitor, shareLimitsReader, SERVED_LANES, type Logger, type PoolLimitMonitor, type PoolSpec, type Registry } from "@shoal/common";
import { describeBrokerConfigs, describeGroupConfigs, describeShareGroup, type AdminOptions } from "@shoal/kafka-share";
import { poolGroupId } from "./lane-lag.ts";

/** How often the gateway reads its share groups' members again (the headroom gauges). */
export const POOL_LIMITS_REFRESH_MS = 30_000;

/**
 * The gateway's check of every share pool in its catalog against the brokers' share-group limits
 * (issue #53): warns at start for each limit a pool's configuration cannot fit, then reads the
 * groups' members every 30 s for the headroom gauges (members against group.share.max.size) and
 * warns when one more worker would be refused.
 */
export function createGatewayPoolLimits(admin: AdminOptions, pools: readonly PoolSpec[], registry: Registry, logger: Logger): PoolLimitMonitor {
  return createPoolLimitMonitor({
    reader: shareLimitsReader({
      describeBrokerConfigs: (names) => describeBrokerConfigs(admin, names),
      describeGroupConfigs: (groupIds, names) => describeGroupConfigs(admin, groupIds, names),
      describeShareGroup: (groupId) => describeShareGroup(admin, groupId),
    }),
    pools: pools
      .filter((p) => p.intake === "share")
      .map((p) => ({
        pool: p.name,
        group: poolGroupId(p.name),
        layout: p.jobTopics,
        lanes: SERVED_LANES.length,
        models: p.models.length,
        partitions: p.partitions,
        ...(p.workers !== undefined ? { declaredWorkers: p.workers } : {}),
      })),
    registry,
    logger,
    refreshMs: POOL_LIMITS_REFRESH_MS,
  });
}
