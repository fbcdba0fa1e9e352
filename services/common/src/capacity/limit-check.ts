/**
 * A pool's configuration against the limits its brokers actually have (issue #53, part 4): what the
 * capacity model says the pool needs of group.share.max.size and group.share.max.share.sessions, for
 * the pool size the operator declared (catalog `workers`) or the one observed in the share group,
 * beside the values read from the brokers (DescribeConfigs). Each shortfall is a warning that names
 * the setting to change. Pure: the reading is the caller's (pool-limits-monitor.ts).
 */
import { membersPerWorker, type TopicLayout } from "./capacity-model.ts";
import { KAFKA_44 } from "./kafka-limits.ts";

/** A setting's value as DescribeConfigs reported it. */
export interface ReportedValue {
  readonly value: string | null;
}

/** The limits that bound one pool, as its brokers have them. */
export interface PoolLimits {
  readonly maxGroupSize: number;
  readonly maxShareSessions: number;
  /** The group's share.partition.max.record.locks (its own value, else the brokers' default). */
  readonly partitionMaxRecordLocks: number;
  readonly maxPartitionMaxRecordLocks: number;
  readonly heartbeatIntervalMs: number;
  readonly brokers: number;
}

function numberOf(values: ReadonlyMap<string, ReportedValue> | undefined, name: string, fallback: number): number {
  const raw = values?.get(name)?.value;
  const n = raw === null || raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(n) ? n : fallback;
}

/**
 * The limits from every broker's settings (the strictest broker binds: a member or session may
 * land on any of them) and the group's; a setting a broker did not report takes Kafka 4.4's default.
 */
export function limitsFromConfigs(brokers: ReadonlyMap<number, ReadonlyMap<string, ReportedValue>>, group?: ReadonlyMap<string, ReportedValue>): PoolLimits {
  const strictest = (name: string, fallback: number): number => {
    const values = [...brokers.values()].map((b) => numberOf(b, name, fallback));
    return values.length === 0 ? fallback : Math.min(...values);
  };
  const brokerLocks = strictest(KAFKA_44.partitionMaxRecordLocks.name, KAFKA_44.partitionMaxRecordLocks.default);
  return {
    maxGroupSize: strictest(KAFKA_44.maxGroupSize.name, KAFKA_44.maxGroupSize.default),
    maxShareSessions: strictest(KAFKA_44.maxShareSessions.name, KAFKA_44.maxShareSessions.default),
    partitionMaxRecordLocks: numberOf(group, KAFKA_44.groupPartitionMaxRecordLocks.name, brokerLocks),
    maxPartitionMaxRecordLocks: strictest(KAFKA_44.maxPartitionMaxRecordLocks.name, KAFKA_44.maxPartitionMaxRecordLocks.default),
    heartbeatIntervalMs: strictest(KAFKA_44.heartbeatIntervalMs.name, KAFKA_44.heartbeatIntervalMs.default),
    brokers: Math.max(1, brokers.size),
  };
}

/** One pool as its catalog entry and share group describe it. */
export interface PoolShape {
  readonly pool: string;
  readonly group: string;
  readonly layout: TopicLayout;
  readonly lanes: number;
  readonly models: number;
  readonly partitions: number;
  /** Declared in the catalog (`workers`); when absent the observed workers stand in. */
  readonly declaredWorkers?: number;
  /** Members in the share group now, and the workers they belong to (undefined: not read). */
  readonly members?: number;
  readonly workers?: number;
}

/** What a pool of `workers` asks of the limits the check compares. */
export interface PoolNeeds {
  readonly workers: number;
  readonly membersPerWorker: number;
  readonly members: number;
  /** Share sessions this pool keeps on its busiest broker (other pools' come on top). */
  readonly sessionsPerBroker: number;
}

/** A limit the pool cannot fit, with the setting to change. */
export interface LimitWarning {
  readonly pool: string;
  readonly setting: string;
  readonly needed: number;
  readonly limit: number;
  readonly message: string;
}

/** The pool's needs for `workers` workers (capacity-model.ts's arithmetic for one group). */
export function poolNeeds(shape: PoolShape, workers: number, brokers: number): PoolNeeds {
  const perWorker = membersPerWorker(shape.layout, shape.lanes, shape.models);
  const topics = perWorker; // a member per topic
  const p = Math.max(1, shape.partitions);
  const sessionsPerTopic = workers >= p ? workers : workers * Math.min(Math.ceil(p / Math.max(1, workers)), brokers);
  const leaders = Math.min(brokers, topics * p);
  return { workers, membersPerWorker: perWorker, members: workers * perWorker, sessionsPerBroker: Math.ceil((topics * sessionsPerTopic) / leaders) };
}

/** Warnings for every limit the pool's configuration does not fit; empty when it fits. */
export function checkPoolLimits(limits: PoolLimits, shape: PoolShape): LimitWarning[] {
  const out: LimitWarning[] = [];
  const workers = shape.declaredWorkers ?? shape.workers ?? 0;
  const source = shape.declaredWorkers !== undefined ? "declared (catalog workers)" : "observed in the share group";
  const needs = poolNeeds(shape, workers, limits.brokers);
  const layout =
    shape.layout === "per-model"
      ? `a member per model and lane (${shape.models} models × ${shape.lanes} lanes) and the retry topic`
      : `a member per lane (${shape.lanes}) and the retry topic`;
  if (workers > 0 && needs.members > limits.maxGroupSize) {
    out.push({
      pool: shape.pool,
      setting: KAFKA_44.maxGroupSize.name,
      needed: needs.members,
      limit: limits.maxGroupSize,
      message:
        `pool ${shape.pool}: ${workers} workers ${source} × ${needs.membersPerWorker} share-group members each (${layout}) = ${needs.members} members, ` +
        `but the brokers' ${KAFKA_44.maxGroupSize.name} is ${limits.maxGroupSize}: workers past ${Math.floor(limits.maxGroupSize / needs.membersPerWorker)} cannot join. ` +
        `Raise ${KAFKA_44.maxGroupSize.name} in every broker's server.properties (at most ${KAFKA_44.maxGroupSize.max}), or split the pool's models over more pools (docs/capacity.md).`,
    });
  }
  if (shape.members !== undefined && shape.members + needs.membersPerWorker > limits.maxGroupSize) {
    out.push({
      pool: shape.pool,
      setting: KAFKA_44.maxGroupSize.name,
      needed: shape.members + needs.membersPerWorker,
      limit: limits.maxGroupSize,
      message:
        `pool ${shape.pool}: share group ${shape.group} has ${shape.members} of ${limits.maxGroupSize} members; one more worker (${needs.membersPerWorker} members) would be refused. ` +
        `Raise ${KAFKA_44.maxGroupSize.name} in every broker's server.properties (at most ${KAFKA_44.maxGroupSize.max}).`,
    });
  }
  if (workers > 0 && needs.sessionsPerBroker > limits.maxShareSessions) {
    out.push({
      pool: shape.pool,
      setting: KAFKA_44.maxShareSessions.name,
      needed: needs.sessionsPerBroker,
      limit: limits.maxShareSessions,
      message:
        `pool ${shape.pool}: ${workers} workers keep about ${needs.sessionsPerBroker} share sessions on the busiest of ${limits.brokers} brokers (a session per member and broker it fetches from), ` +
        `but ${KAFKA_44.maxShareSessions.name} is ${limits.maxShareSessions}: fetches past it fail. Raise ${KAFKA_44.maxShareSessions.name} in every broker's server.properties, ` +
        `or give the jobs topics more partitions (catalog partitions) so their leaders spread over the brokers.`,
    });
  }
  return out;
}
