/**
 * Acknowledgements waiting to be sent, per share-partition, and their wire form: runs of
 * consecutive offsets become one AcknowledgementBatch with a single type when all agree (the
 * common case: a whole fetch accepted) or one type per offset otherwise.
 */
import type { ShareFetchRequestAcknowledgementBatch } from "./generated/share-fetch.ts";

/** Kafka's acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes). */
export const AckType = { gap: 0, accept: 1, release: 2, reject: 3, renew: 4 } as const;
export type AckTypeName = keyof typeof AckType;

/** A partition as the share protocol names it: topic id and index. */
export interface PartitionRef {
  readonly topicId: string;
  readonly topic: string;
  readonly partition: number;
}

/** The acknowledgements of one partition taken for one request. */
export interface PartitionAcks extends PartitionRef {
  readonly offsets: ReadonlyMap<bigint, number>;
}

export function partitionKey(topicId: string, partition: number): string {
  return `${topicId}:${partition}`;
}

/** Acks queued for one broker's share session. */
export class AckQueue {
  readonly #byPartition = new Map<string, { ref: PartitionRef; offsets: Map<bigint, number>; since: number; urgent: boolean }>();

  get size(): number {
    let n = 0;
    for (const p of this.#byPartition.values()) n += p.offsets.size;
    return n;
  }

  /** Queues (or replaces) the acknowledgement of one offset, at `now` (ms, any monotonic clock). */
  add(ref: PartitionRef, offset: bigint, type: number, now = performance.now()): void {
    const key = partitionKey(ref.topicId, ref.partition);
    let entry = this.#byPartition.get(key);
    if (!entry) {
      entry = { ref, offsets: new Map(), since: now, urgent: false };
      this.#byPartition.set(key, entry);
    }
    entry.offsets.set(offset, type);
    // A release hands the record to another member and a reject ends it: neither should wait.
    if (type === AckType.release || type === AckType.reject) entry.urgent = true;
  }

  /**
   * Whether the acks of the partitions `which` selects should go now: some of them have waited
   * `lingerMs` since the first was queued, or hold a release or a reject. With lingerMs 0, whenever
   * any are queued.
   */
  due(which: (ref: PartitionRef) => boolean, lingerMs: number, now = performance.now()): boolean {
    for (const { ref, offsets, since, urgent } of this.#byPartition.values()) {
      if (offsets.size > 0 && which(ref) && (urgent || now - since >= lingerMs)) return true;
    }
    return false;
  }

  /** Removes and returns what is queued (for the partitions `which` selects, default all). */
  take(which: (ref: PartitionRef) => boolean = () => true): PartitionAcks[] {
    const out: PartitionAcks[] = [];
    for (const [key, { ref, offsets }] of this.#byPartition) {
      if (!which(ref)) continue;
      out.push({ ...ref, offsets });
      this.#byPartition.delete(key);
    }
    return out;
  }
}

/** Encodes one partition's acks as AcknowledgementBatches, in offset order. */
export function toBatches(offsets: ReadonlyMap<bigint, number>): ShareFetchRequestAcknowledgementBatch[] {
  const sorted = [...offsets.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const batches: ShareFetchRequestAcknowledgementBatch[] = [];
  let start = 0;
  for (let i = 1; i <= sorted.length; i++) {
    const prev = sorted[i - 1]!;
    if (i < sorted.length && sorted[i] === prev + 1n) continue;
    const run = sorted.slice(start, i);
    const types = run.map((o) => offsets.get(o)!);
    const uniform = types.every((t) => t === types[0]);
    batches.push({ firstOffset: run[0]!, lastOffset: prev, acknowledgeTypes: uniform ? [types[0]!] : types });
    start = i;
  }
  return batches;
}
