/**
 * Records waiting per topic, from what the broker reports: the pure arithmetic of the lag reader
 * (lag-reader.ts), apart so it is tested without a broker.
 */

/** `topic:partition`, the key of every per-partition map here. */
export const partitionKey = (topic: string, partition: number): string => `${topic}:${partition}`;
/** The topic of a partitionKey. */
export const topicOfKey = (key: string): string => key.slice(0, key.lastIndexOf(":"));

/** A share group's word on one partition (DescribeShareGroupOffsets). */
export interface SharePartitionState {
  readonly topic: string;
  readonly partition: number;
  /** The share-partition start offset; -1 where the group has no state for the partition yet. */
  readonly startOffset: bigint;
  /** The broker's lag (KIP-1226); absent where it gave none. */
  readonly lag?: bigint;
}

/** A consumer group's committed offset on one partition (-1: none). */
export interface CommittedOffset {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
}

/** A partition's watermarks as far as they were read (`low` only where it was needed). */
export interface Watermarks {
  readonly high: bigint;
  readonly low?: bigint;
}

/** What a partition needs from ListOffsets: nothing, the high watermark, or both watermarks. */
export type Need = "none" | "high" | "both";

/** A share partition needs watermarks only where the broker gave no lag; the low one only without a start offset. */
export function shareNeed(p: SharePartitionState): Need {
  if (p.lag !== undefined) return "none";
  return p.startOffset >= 0n ? "high" : "both";
}

/** A consumer-group partition always needs its high watermark; the low one only without a commit. */
export function consumerNeed(c: CommittedOffset): Need {
  return c.offset >= 0n ? "high" : "both";
}

function add(out: Map<string, number>, topic: string, records: bigint): void {
  out.set(topic, (out.get(topic) ?? 0) + Math.max(0, Number(records)));
}

function watermarks(ends: ReadonlyMap<string, Watermarks>, topic: string, partition: number, needLow: boolean): Watermarks {
  const w = ends.get(partitionKey(topic, partition));
  if (!w || (needLow && w.low === undefined)) throw new Error(`no watermarks read for ${topic}-${partition}`);
  return w;
}

/**
 * A share group's backlog per topic: the broker's lag where it has one (records from the start
 * offset to the high watermark not yet acknowledged; acquired ones count), else high watermark −
 * start offset, from the low watermark without a start offset (workers read from the earliest).
 */
export function shareBacklog(topics: readonly string[], parts: readonly SharePartitionState[], ends: ReadonlyMap<string, Watermarks>): Map<string, number> {
  const out = new Map(topics.map((t) => [t, 0] as const));
  for (const p of parts) {
    if (!out.has(p.topic)) continue;
    const need = shareNeed(p);
    if (need === "none") {
      add(out, p.topic, p.lag ?? 0n);
      continue;
    }
    const w = watermarks(ends, p.topic, p.partition, need === "both");
    add(out, p.topic, w.high - (p.startOffset >= 0n ? p.startOffset : (w.low ?? 0n)));
  }
  return out;
}

/** A consumer group's backlog per topic: high watermark − commit, from the low watermark without one. */
export function consumerBacklog(topics: readonly string[], committed: readonly CommittedOffset[], ends: ReadonlyMap<string, Watermarks>): Map<string, number> {
  const out = new Map(topics.map((t) => [t, 0] as const));
  for (const c of committed) {
    if (!out.has(c.topic)) continue;
    const w = watermarks(ends, c.topic, c.partition, c.offset < 0n);
    add(out, c.topic, w.high - (c.offset >= 0n ? c.offset : (w.low ?? 0n)));
  }
  return out;
}
