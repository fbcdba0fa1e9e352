/**
 * The pool's needs against Kafka's limits (capacity-model.ts, kafka-limits.ts): which limit a pool
 * meets first as it grows, and the smallest change of design and settings that fits a given size.
 */
import { capacityReport, type CapacityInput, type CapacityReport } from "./capacity-model.ts";
import { KAFKA_44, type KafkaLimit } from "./kafka-limits.ts";

/** The three settings a pool's size runs into. */
export interface LimitSettings {
  /** group.share.max.size */
  readonly maxGroupSize: number;
  /** group.share.max.share.sessions */
  readonly maxShareSessions: number;
  /** share.partition.max.record.locks (the group's; its default is the broker's group.share.partition.max.record.locks) */
  readonly partitionMaxRecordLocks: number;
}

/** Kafka 4.4's defaults. */
export const DEFAULT_LIMIT_SETTINGS: LimitSettings = {
  maxGroupSize: KAFKA_44.maxGroupSize.default,
  maxShareSessions: KAFKA_44.maxShareSessions.default,
  partitionMaxRecordLocks: KAFKA_44.groupPartitionMaxRecordLocks.default,
};

/** One limit beside what the pool needs of it. */
export interface LimitUse {
  readonly limit: KafkaLimit;
  readonly needed: number;
  readonly allowed: number;
  readonly fits: boolean;
  /** The most workers that fit it, the rest of the input unchanged (0: not even one). */
  readonly maxWorkers: number;
}

type Need = (r: CapacityReport) => number;
const NEEDS: ReadonlyArray<{ limit: KafkaLimit; need: Need; allowed: (s: LimitSettings) => number }> = [
  { limit: KAFKA_44.maxGroupSize, need: (r) => r.maxMembersPerGroup, allowed: (s) => s.maxGroupSize },
  { limit: KAFKA_44.groupPartitionMaxRecordLocks, need: (r) => r.maxLocksPerPartition, allowed: (s) => s.partitionMaxRecordLocks },
  { limit: KAFKA_44.maxShareSessions, need: (r) => r.maxSessionsPerBroker, allowed: (s) => s.maxShareSessions },
];

/** Largest worker count for which `need` stays within `allowed` (needs grow with workers). */
function maxWorkers(input: CapacityInput, need: Need, allowed: number): number {
  const fits = (n: number): boolean => need(capacityReport({ ...input, workers: n })) <= allowed;
  if (!fits(1)) return 0;
  let lo = 1;
  let hi = 2;
  while (fits(hi) && hi < 1_000_000) [lo, hi] = [hi, hi * 2];
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Each limit beside the pool's need of it, and how many workers it allows. */
export function limitUses(input: CapacityInput, settings: LimitSettings = DEFAULT_LIMIT_SETTINGS): LimitUse[] {
  const report = capacityReport(input);
  return NEEDS.map(({ limit, need, allowed }) => {
    const a = allowed(settings);
    return { limit, needed: need(report), allowed: a, fits: need(report) <= a, maxWorkers: maxWorkers(input, need, a) };
  });
}

/** The limit that stops the pool's growth first (fewest workers). */
export function bindingLimit(uses: readonly LimitUse[]): LimitUse {
  return uses.reduce((first, u) => (u.maxWorkers < first.maxWorkers ? u : first));
}

/** A configuration that fits, and the settings it needs. */
export interface CapacityFit {
  /** The input with the fitted groups and partitions. */
  readonly input: CapacityInput;
  readonly report: CapacityReport;
  /** Settings to change from Kafka's defaults (name → value); the rest keep their defaults. */
  readonly broker: Readonly<Record<string, number>>;
  readonly group: Readonly<Record<string, number>>;
  /** What the configuration gives up, where it had to. */
  readonly notes: readonly string[];
}

export interface FitOptions {
  /** Settings are chosen so that the pool uses at most this fraction of each (default 0.8). */
  readonly headroom?: number;
}

const roundUp = (x: number, step: number): number => Math.ceil(x / step) * step;

/**
 * The fewest share groups (pools, models sharded by token load) and partitions that fit `input`'s
 * workers, and the settings to go with them: group.share.max.size up to its maximum of 1,000, a
 * group's share.partition.max.record.locks up to 4,000 (a group setting, no broker restart), past
 * that the broker's group.share.max.partition.max.record.locks up to 10,000, and sessions per
 * broker (no maximum). Partitions stay at most the group's workers where possible: with more
 * partitions than members each partition has one reader, and the queue is no longer shared.
 */
export function fitConfiguration(input: CapacityInput, opts: FitOptions = {}): CapacityFit | undefined {
  const headroom = opts.headroom ?? 0.8;
  let fallback: CapacityFit | undefined;
  for (let groups = 1; groups <= input.models.length; groups++) {
    const base = capacityReport({ ...input, groups, partitions: 1 });
    if (base.maxMembersPerGroup > KAFKA_44.maxGroupSize.max) continue;
    const notes: string[] = [];
    let lockCap: number = KAFKA_44.maxPartitionMaxRecordLocks.default;
    const partitionsFor = (cap: number): number[] => base.groups.map((g) => Math.max(1, Math.ceil(g.hottestTopicLocks / (cap * headroom))));
    let partitions = partitionsFor(lockCap);
    if (partitions.some((p, i) => p > base.groups[i]!.workers)) {
      lockCap = KAFKA_44.maxPartitionMaxRecordLocks.max;
      partitions = partitionsFor(lockCap);
    }
    const unshared = base.groups.filter((g, i) => partitions[i]! > g.workers);
    for (const g of unshared) {
      notes.push(
        `pool of ${g.models.join(", ")}: ${partitions[base.groups.indexOf(g)]} partitions for ${g.workers} workers (each partition one reader; lower SHOAL_SHARE_ACK_LINGER_MS or SHOAL_IDLE_TAKE_TOKENS to hold fewer jobs)`,
      );
    }
    const fitted: CapacityInput = { ...input, groups, partitions };
    const report = capacityReport(fitted);
    const broker: Record<string, number> = {};
    const group: Record<string, number> = {};
    const members = Math.min(KAFKA_44.maxGroupSize.max, roundUp(report.maxMembersPerGroup / headroom, 10));
    if (members > KAFKA_44.maxGroupSize.default) broker[KAFKA_44.maxGroupSize.name] = members;
    const sessions = roundUp(report.maxSessionsPerBroker / headroom, 100);
    if (sessions > KAFKA_44.maxShareSessions.default) broker[KAFKA_44.maxShareSessions.name] = sessions;
    const locks = Math.min(lockCap, roundUp(report.maxLocksPerPartition / headroom, 100));
    if (locks > KAFKA_44.groupPartitionMaxRecordLocks.default) group[KAFKA_44.groupPartitionMaxRecordLocks.name] = locks;
    if (locks > KAFKA_44.maxPartitionMaxRecordLocks.default) broker[KAFKA_44.maxPartitionMaxRecordLocks.name] = locks;
    const fit: CapacityFit = { input: fitted, report, broker, group, notes };
    if (unshared.length === 0) return fit;
    fallback ??= fit;
  }
  return fallback;
}
