/**
 * How far one share pool goes (issue #53): for N workers (one accelerator each), a fleet of models,
 * the lanes and the topic layout, what the pool asks of Kafka — share-group members, share sessions
 * per broker, record locks per share-partition, heartbeats and fetches per second — beside Kafka
 * 4.4's limits (kafka-limits.ts). Pure arithmetic on the way Shoal subscribes:
 *
 * - A pool is one share group, `shoal-pool-<pool>`; a worker is one member per jobs topic it reads
 *   (services/worker/src/intake/create-intake.ts): the interactive and batch topics (one per lane,
 *   or one per model and lane with `jobTopics: per-model`) and the pool's retry topic.
 * - A member holds one share session on each broker leading a partition assigned to it (Kafka's
 *   ShareSessionCache is keyed by group and member). With at least as many members as partitions,
 *   the share assignor gives each member one partition of the topic.
 * - Records locked on a partition, by Little's law: jobs/s × how long a job stays acquired (its
 *   batch's compute, then its acknowledgement's linger and the fetch that carries it) plus the jobs a
 *   worker takes at once and holds before computing them (an idle take).
 * - Models sharded over several pools (a model belongs to one pool) share the workers by token load.
 */
import { KAFKA_44 } from "./kafka-limits.ts";

/** A pool's jobs topic layout (catalog `jobTopics`). */
export type TopicLayout = "per-lane" | "per-model";

/** One model of the fleet and its share of the work. */
export interface FleetModel {
  readonly id: string;
  /** Fraction of all jobs (calls) that are this model's: what its topic's locks follow. */
  readonly jobShare: number;
  /** Fraction of all tokens: what its devices' load follows. */
  readonly tokenShare: number;
}

/** The pool and the hardware, with the worker's share-intake timings. */
export interface CapacityInput {
  /** Worker processes, one accelerator each. */
  readonly workers: number;
  readonly models: readonly FleetModel[];
  /** Lanes with topics (interactive, batch). */
  readonly lanes: number;
  readonly layout: TopicLayout;
  /** Mean tokens per job over the fleet. */
  readonly meanJobTokens: number;
  /** Useful tokens per second one accelerator serves. */
  readonly deviceTokensPerSecond: number;
  /** Fraction of that throughput in use (1: saturated). */
  readonly utilisation: number;
  /** Fraction of the jobs on the busiest lane (1: all on one lane, the worst case). */
  readonly busiestLaneShare: number;
  /** A batch's tokens (SHOAL_BATCH_MAX_TOKENS): a job stays acquired while its batch computes. */
  readonly batchTokens: number;
  /** What an idle worker takes at once (SHOAL_IDLE_TAKE_TOKENS): held before it is computed. */
  readonly idleTakeTokens: number;
  /** From a job's answer to its acknowledgement at the broker: SHOAL_SHARE_ACK_LINGER_MS plus the fetch that carries it. */
  readonly ackDelayMs: number;
  /** SHOAL_SHARE_ACK_LINGER_MS: each member writes a partition's share state at most once per linger. */
  readonly ackLingerMs: number;
  /** Waiting fetch of an idle worker's interactive topics (SHOAL_SHARE_IDLE_WAIT_MS). */
  readonly idleWaitMs: number;
  /** Waiting fetch of its retry and batch-lane topics. */
  readonly laterIdleWaitMs: number;
  /** group.share.heartbeat.interval.ms. */
  readonly heartbeatIntervalMs: number;
  readonly brokers: number;
  /** Partitions of each jobs and retry topic (catalog `partitions`), one value for every pool. */
  readonly partitions: number | readonly number[];
  /** Share groups (pools) the models are sharded over. */
  readonly groups: number;
}

/** The worker's share-intake defaults on an accelerator (services/worker/src/config.ts, README "GPU hosts"). */
export const ACCELERATOR_DEFAULTS = {
  lanes: 2,
  utilisation: 1,
  busiestLaneShare: 1,
  // SHOAL_BATCH_MAX_TOKENS=16384 on a GPU; an idle accelerator worker takes four batches.
  batchTokens: 16_384,
  idleTakeTokens: 4 * 16_384,
  // SHOAL_SHARE_ACK_LINGER_MS (100), then the busy worker's next fetch (ACK_WAIT_MS, at most 100).
  ackDelayMs: 200,
  ackLingerMs: 100,
  idleWaitMs: 100,
  laterIdleWaitMs: 2_000,
  heartbeatIntervalMs: KAFKA_44.heartbeatIntervalMs.default,
  brokers: 3,
  partitions: 1,
  groups: 1,
} as const;

/** One accelerator's share of the load. */
export interface DeviceFigures {
  readonly jobsPerSecond: number;
  /** How long a job stays acquired after its batch starts: compute + acknowledgement delay, ms. */
  readonly heldMs: number;
  /** Jobs one idle take brings (held until computed). */
  readonly recordsPerTake: number;
  /** Records it keeps locked: jobsPerSecond × heldMs + recordsPerTake. */
  readonly locks: number;
}

/** One share group (pool) of the sharded fleet. */
export interface GroupFigures {
  readonly models: readonly string[];
  readonly workers: number;
  readonly partitions: number;
  readonly membersPerWorker: number;
  readonly members: number;
  /** Jobs topics and the retry topic. */
  readonly topics: number;
  /** Records locked on the group's busiest topic, all partitions together. */
  readonly hottestTopicLocks: number;
  /** …and on each of its partitions (spread evenly). */
  readonly locksPerPartition: number;
  readonly heartbeatsPerSecond: number;
}

/** What the pool asks of Kafka. */
export interface CapacityReport {
  readonly device: DeviceFigures;
  readonly groups: readonly GroupFigures[];
  /** The largest group's members (against group.share.max.size). */
  readonly maxMembersPerGroup: number;
  /** The highest locks on one share-partition (against share.partition.max.record.locks). */
  readonly maxLocksPerPartition: number;
  readonly totalMembers: number;
  /** Share sessions on the busiest broker (against group.share.max.share.sessions). */
  readonly maxSessionsPerBroker: number;
  readonly totalSessions: number;
  /** Heartbeats per second, all groups; and at the busiest group coordinator. */
  readonly heartbeatsPerSecond: number;
  readonly maxHeartbeatsPerCoordinator: number;
  /** Waiting fetches per second of a pool with nothing to do (the most the waits send), all brokers; and at the busiest. */
  readonly idleFetchesPerSecond: number;
  readonly maxIdleFetchesPerBroker: number;
  /** Fetches that take jobs, per second, at the given utilisation. */
  readonly takeFetchesPerSecond: number;
  /** Share-state writes per second at most (one per acknowledging request and partition; each member acks once per linger at most). */
  readonly stateWritesPerSecond: number;
}

/** Members one worker adds to its pool's share group: a member per jobs topic, plus the retry topic. */
export function membersPerWorker(layout: TopicLayout, lanes: number, models: number): number {
  return (layout === "per-model" ? lanes * models : lanes) + 1;
}

/** One accelerator's jobs per second and the records it keeps locked (Little's law). */
export function deviceFigures(input: CapacityInput): DeviceFigures {
  const tokensPerSecond = input.deviceTokensPerSecond * input.utilisation;
  const jobsPerSecond = tokensPerSecond / input.meanJobTokens;
  const heldMs = (1_000 * input.batchTokens) / input.deviceTokensPerSecond + input.ackDelayMs;
  const recordsPerTake = Math.max(1, input.idleTakeTokens / input.meanJobTokens);
  return { jobsPerSecond, heldMs, recordsPerTake, locks: (jobsPerSecond * heldMs) / 1_000 + recordsPerTake };
}

/**
 * Shards the models over `groups` pools, heaviest token load first onto the lightest pool (LPT), so
 * that each pool's workers, given by its token share, stay as even as the fleet allows.
 */
export function shardModels(models: readonly FleetModel[], groups: number): FleetModel[][] {
  const bins = Array.from({ length: Math.max(1, Math.min(groups, models.length)) }, () => ({ load: 0, models: [] as FleetModel[] }));
  for (const m of [...models].sort((a, b) => b.tokenShare - a.tokenShare || a.id.localeCompare(b.id))) {
    const bin = bins.reduce((min, b) => (b.load < min.load ? b : min));
    bin.models.push(m);
    bin.load += m.tokenShare;
  }
  return bins.map((b) => b.models);
}

/** Splits `total` workers by weight, largest remainders first, at least one each. */
export function splitWorkers(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0) || 1;
  const exact = weights.map((w) => (total * w) / sum);
  const out = exact.map((x) => Math.max(1, Math.floor(x)));
  let left = total - out.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, rem: x - Math.floor(x) })).sort((a, b) => b.rem - a.rem || a.i - b.i);
  for (let k = 0; left > 0; k = (k + 1) % order.length, left--) out[order[k]!.i]!++;
  return out;
}

/** Share sessions a topic of `partitions` partitions costs with `members` members, in all. */
function topicSessions(members: number, partitions: number, brokers: number): number {
  if (members >= partitions) return members;
  return members * Math.min(Math.ceil(partitions / members), brokers);
}

/** What the pool asks of Kafka (see the file comment for the arithmetic). */
export function capacityReport(input: CapacityInput): CapacityReport {
  const device = deviceFigures(input);
  const shards = shardModels(input.models, input.groups);
  const workers = splitWorkers(
    input.workers,
    shards.map((s) => s.reduce((a, m) => a + m.tokenShare, 0)),
  );
  const totalJobShare = input.models.reduce((a, m) => a + m.jobShare, 0) || 1;
  const fleetLocks = input.workers * device.locks;
  const brokerSessions = new Array<number>(input.brokers).fill(0);
  const brokerFetches = new Array<number>(input.brokers).fill(0);
  let leader = 0;
  let stateWrites = 0;
  const groups: GroupFigures[] = shards.map((models, g) => {
    const n = workers[g]!;
    const partitions = typeof input.partitions === "number" ? input.partitions : (input.partitions[g] ?? input.partitions.at(-1) ?? 1);
    const perWorker = membersPerWorker(input.layout, input.lanes, models.length);
    // Jobs topics with their share of the fleet's jobs (on the busiest lane) and whether they are
    // the first topics a worker asks (interactive: the short idle wait) or later ones.
    const jobsShare = (ms: readonly FleetModel[]): number => ms.reduce((a, m) => a + m.jobShare, 0) / totalJobShare;
    const topics: Array<{ share: number; first: boolean }> = [];
    for (let lane = 0; lane < input.lanes; lane++) {
      const laneShare = lane === 0 ? input.busiestLaneShare : (1 - input.busiestLaneShare) / Math.max(1, input.lanes - 1);
      if (input.layout === "per-model") for (const m of models) topics.push({ share: jobsShare([m]) * laneShare, first: lane === 0 });
      else topics.push({ share: jobsShare(models) * laneShare, first: lane === 0 });
    }
    topics.push({ share: 0, first: false }); // the retry topic: few jobs
    const hottest = Math.max(...topics.map((t) => t.share));
    for (const t of topics) {
      const sessions = topicSessions(n, partitions, input.brokers);
      const fetches = (n * 1_000) / (t.first ? input.idleWaitMs : input.laterIdleWaitMs);
      // Partition leaders round-robin over the brokers, as Kafka spreads them.
      for (let p = 0; p < partitions; p++, leader = (leader + 1) % input.brokers) {
        brokerSessions[leader]! += sessions / partitions;
        brokerFetches[leader]! += fetches / partitions;
      }
      const jobsPerSecond = input.workers * device.jobsPerSecond * t.share;
      stateWrites += Math.min(jobsPerSecond, Math.max(n, partitions) * (1_000 / Math.max(1, input.ackLingerMs)));
    }
    const hottestTopicLocks = fleetLocks * hottest;
    const members = n * perWorker;
    return {
      models: models.map((m) => m.id),
      workers: n,
      partitions,
      membersPerWorker: perWorker,
      members,
      topics: topics.length,
      hottestTopicLocks,
      locksPerPartition: hottestTopicLocks / partitions,
      heartbeatsPerSecond: (members * 1_000) / input.heartbeatIntervalMs,
    };
  });
  // Group coordinators: the largest groups on different brokers first.
  const coordinators = new Array<number>(input.brokers).fill(0);
  for (const g of [...groups].sort((a, b) => b.heartbeatsPerSecond - a.heartbeatsPerSecond)) {
    const i = coordinators.indexOf(Math.min(...coordinators));
    coordinators[i]! += g.heartbeatsPerSecond;
  }
  return {
    device,
    groups,
    maxMembersPerGroup: Math.max(...groups.map((g) => g.members)),
    maxLocksPerPartition: Math.max(...groups.map((g) => g.locksPerPartition)),
    totalMembers: groups.reduce((a, g) => a + g.members, 0),
    maxSessionsPerBroker: Math.max(...brokerSessions),
    totalSessions: brokerSessions.reduce((a, b) => a + b, 0),
    heartbeatsPerSecond: groups.reduce((a, g) => a + g.heartbeatsPerSecond, 0),
    maxHeartbeatsPerCoordinator: Math.max(...coordinators),
    idleFetchesPerSecond: brokerFetches.reduce((a, b) => a + b, 0),
    maxIdleFetchesPerBroker: Math.max(...brokerFetches),
    takeFetchesPerSecond: (input.workers * device.jobsPerSecond) / device.recordsPerTake,
    stateWritesPerSecond: stateWrites,
  };
}
