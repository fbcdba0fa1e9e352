/**
 * Reads the broker settings that bound the share pools a service serves, warns once at start for
 * each limit a pool's configuration cannot fit (limit-check.ts), and exports the headroom as
 * Prometheus gauges: members in each share group against group.share.max.size, the group's record
 * lock limit per partition and partitions, and, where the service holds records (a worker), how
 * many it holds now: Kafka does not tell a client how many locks a share-partition has in use, so
 * the sum over a pool's workers stands in (docs/capacity.md, the alert rules in infra/k8s).
 */
import { Gauge, type Registry } from "../telemetry/metrics.ts";
import type { Logger } from "../logger.ts";
import { BROKER_LIMIT_NAMES, GROUP_LIMIT_NAMES } from "./kafka-limits.ts";
import { checkPoolLimits, limitsFromConfigs, poolNeeds, type LimitWarning, type PoolShape, type ReportedValue } from "./limit-check.ts";

/** What the monitor reads from Kafka (the service wires @shoal/kafka-share's admin calls in). */
export interface ShareLimitsReader {
  brokerConfigs(names: readonly string[]): Promise<ReadonlyMap<number, ReadonlyMap<string, ReportedValue>>>;
  groupConfigs(groupIds: readonly string[], names: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, ReportedValue>>>;
  /** Members of a share group now, and the distinct workers (client ids less the member suffix) among them. */
  groupMembers(groupId: string): Promise<{ readonly members: number; readonly workers: number }>;
}

export interface PoolLimitMonitorOptions {
  readonly reader: ShareLimitsReader;
  /** The share pools to watch (their members and workers are read, not given). */
  readonly pools: ReadonlyArray<Omit<PoolShape, "members" | "workers">>;
  readonly registry: Registry;
  readonly logger: Logger;
  /** Records this process holds now (delivered, not settled), per pool; absent where it holds none. */
  readonly held?: (pool: string) => number;
  /** How often members are read again after start; 0 (default): at start only. */
  readonly refreshMs?: number;
}

export interface PoolLimitMonitor {
  /** Reads the limits, warns for what does not fit, sets the gauges. Never throws: a failed read is logged. */
  check(): Promise<readonly LimitWarning[]>;
  /** check(), then again every refreshMs. */
  start(): Promise<readonly LimitWarning[]>;
  stop(): void;
}

/** Creates the monitor; its gauges are registered at once (and read nothing until checked). */
export function createPoolLimitMonitor(opts: PoolLimitMonitorOptions): PoolLimitMonitor {
  const log = opts.logger.child({ component: "pool-limits" });
  const registers = [opts.registry];
  const gauge = (name: string, help: string, labelNames: string[] = ["pool"]) => new Gauge({ name, help, labelNames, registers });
  const members = gauge("shoal_share_group_members", "Members in the pool's share group (ShareGroupDescribe)");
  const membersLimit = gauge("shoal_share_group_members_limit", "The brokers' group.share.max.size (the strictest broker)");
  const perWorker = gauge("shoal_share_group_members_per_worker", "Share-group members one worker of the pool adds (a member per jobs topic)");
  const locksLimit = gauge("shoal_share_record_locks_limit", "The pool group's share.partition.max.record.locks: records locked per share-partition at most");
  const partitions = gauge("shoal_share_pool_partitions", "Partitions of each of the pool's jobs topics");
  const sessionsNeeded = gauge("shoal_share_sessions_needed", "Share sessions the pool's workers keep on the busiest broker (capacity model)");
  const sessionsLimit = gauge("shoal_share_sessions_limit", "The brokers' group.share.max.share.sessions");
  const warnings = gauge("shoal_share_limit_warning", "1 while the pool's configuration does not fit this Kafka setting", ["pool", "setting"]);
  if (opts.held) {
    const held = opts.held;
    new Gauge({
      name: "shoal_share_held_records",
      help: "Records of the pool this process holds under an acquisition lock (delivered, not yet acknowledged)",
      labelNames: ["pool"],
      registers,
      collect() {
        for (const p of opts.pools) this.set({ pool: p.pool }, held(p.pool));
      },
    });
  }
  const warned = new Set<string>();
  let timer: NodeJS.Timeout | undefined;

  async function check(): Promise<readonly LimitWarning[]> {
    if (opts.pools.length === 0) return [];
    try {
      const [brokers, groups] = await Promise.all([
        opts.reader.brokerConfigs(BROKER_LIMIT_NAMES),
        opts.reader.groupConfigs(
          opts.pools.map((p) => p.group),
          GROUP_LIMIT_NAMES,
        ),
      ]);
      const out: LimitWarning[] = [];
      for (const pool of opts.pools) {
        const limits = limitsFromConfigs(brokers, groups.get(pool.group));
        const seen = await opts.reader.groupMembers(pool.group);
        const shape: PoolShape = { ...pool, members: seen.members, workers: seen.workers };
        const needs = poolNeeds(shape, pool.declaredWorkers ?? seen.workers, limits.brokers);
        const labels = { pool: pool.pool };
        members.set(labels, seen.members);
        membersLimit.set(labels, limits.maxGroupSize);
        perWorker.set(labels, needs.membersPerWorker);
        locksLimit.set(labels, limits.partitionMaxRecordLocks);
        partitions.set(labels, pool.partitions);
        sessionsNeeded.set(labels, needs.sessionsPerBroker);
        sessionsLimit.set(labels, limits.maxShareSessions);
        const found = checkPoolLimits(limits, shape);
        for (const setting of new Set([...warned].filter((k) => k.startsWith(`${pool.pool}\0`)).map((k) => k.split("\0")[1]!))) {
          if (!found.some((w) => w.setting === setting)) {
            warned.delete(`${pool.pool}\0${setting}`);
            warnings.set({ pool: pool.pool, setting }, 0);
            log.info({ pool: pool.pool, setting }, "the pool fits this Kafka limit again");
          }
        }
        for (const w of found) {
          warnings.set({ pool: w.pool, setting: w.setting }, 1);
          const key = `${w.pool}\0${w.setting}`;
          // Each shortfall once until it clears: a refresh every 30 s must not repeat it.
          if (!warned.has(key)) log.warn({ pool: w.pool, setting: w.setting, needed: w.needed, limit: w.limit }, w.message);
          warned.add(key);
        }
        out.push(...found);
      }
      return out;
    } catch (err) {
      log.warn({ err }, "could not read the brokers' share-group limits; the pool's fit is not checked");
      return [];
    }
  }

  return {
    check,
    async start() {
      const found = await check();
      const every = opts.refreshMs ?? 0;
      if (every > 0 && timer === undefined) {
        timer = setInterval(() => void check(), every);
        timer.unref();
      }
      return found;
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** The @shoal/kafka-share admin calls a reader is made of (passed in: common does not depend on it). */
export interface ShareAdminCalls {
  describeBrokerConfigs(names: readonly string[]): Promise<ReadonlyMap<number, ReadonlyMap<string, ReportedValue>>>;
  describeGroupConfigs(groupIds: readonly string[], names: readonly string[]): Promise<ReadonlyMap<string, ReadonlyMap<string, ReportedValue>>>;
  describeShareGroup(groupId: string): Promise<{ readonly members: ReadonlyArray<{ readonly clientId: string }> }>;
}

/**
 * A reader over the admin calls. A worker's members are `<clientId>-<i>`, one per topic
 * (services/worker/src/intake/share-intake.ts), so the workers are the client ids less that suffix.
 */
export function shareLimitsReader(calls: ShareAdminCalls): ShareLimitsReader {
  return {
    brokerConfigs: (names) => calls.describeBrokerConfigs(names),
    groupConfigs: (groupIds, names) => calls.describeGroupConfigs(groupIds, names),
    async groupMembers(groupId) {
      const { members } = await calls.describeShareGroup(groupId);
      return { members: members.length, workers: new Set(members.map((m) => m.clientId.replace(/-\d+$/, ""))).size };
    },
  };
}
