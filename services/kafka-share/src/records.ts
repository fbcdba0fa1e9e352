/**
 * Turns one partition of a ShareFetch response into records. The broker sends whole record batches
 * but acquires only the offset ranges listed in AcquiredRecords (with record-limit acquire mode, part
 * of a producer batch): records outside them belong to other members and are dropped here. Acquired
 * offsets that hold no user record (transaction markers, compacted-away offsets) must still be
 * acknowledged, as GAP, or they stay locked until the lock expires and count deliveries.
 */
import { Reader, readRecordsBatches } from "@platformatic/kafka";
import type { ShareFetchResponsePartitionData } from "./generated/share-fetch.ts";

/** One delivered record. Pass it back to `acknowledge()` / `renew()`. */
export interface ShareRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Header keys decoded as UTF-8; duplicates kept in order. */
  readonly headers: ReadonlyArray<readonly [string, Buffer | null]>;
  /** Milliseconds since the epoch (create or log-append time, per the topic). */
  readonly timestamp: number;
  /** 1 on first delivery; higher after a release, a lock expiry or a member's crash. */
  readonly deliveryCount: number;
}

const IS_CONTROL = 1 << 5;
/** More gap offsets than this in one response means something is off; don't allocate them all. */
const MAX_GAPS = 10_000;

export interface DecodedPartition {
  readonly records: ShareRecord[];
  /** Acquired offsets with no user record: acknowledge them as GAP. */
  readonly gaps: bigint[];
}

export function decodePartition(topic: string, data: ShareFetchResponsePartitionData): DecodedPartition {
  const ranges = data.acquiredRecords;
  const records: ShareRecord[] = [];
  const seen = new Set<bigint>();
  if (ranges.length === 0) return { records, gaps: [] };
  const deliveryCountOf = (offset: bigint): number | undefined => {
    for (const r of ranges) if (offset >= r.firstOffset && offset <= r.lastOffset) return r.deliveryCount;
    return undefined;
  };
  if (data.records.length > 0) {
    for (const batch of readRecordsBatches(Reader.from(data.records))) {
      const control = (batch.attributes & IS_CONTROL) !== 0;
      for (const rec of batch.records) {
        const offset = batch.firstOffset + BigInt(rec.offsetDelta);
        const deliveryCount = deliveryCountOf(offset);
        if (deliveryCount === undefined || seen.has(offset)) continue;
        if (control) continue; // a transaction marker: left as a gap below
        seen.add(offset);
        records.push({
          topic,
          partition: data.partitionIndex,
          offset,
          key: rec.key,
          value: rec.value,
          headers: rec.headers.map(([k, v]) => [k ? k.toString("utf8") : "", v] as const),
          timestamp: Number(batch.firstTimestamp + rec.timestampDelta),
          deliveryCount,
        });
      }
    }
  }
  const gaps: bigint[] = [];
  for (const r of ranges) {
    for (let o = r.firstOffset; o <= r.lastOffset && gaps.length < MAX_GAPS; o++) if (!seen.has(o)) gaps.push(o);
  }
  records.sort((a, b) => (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0));
  return { records, gaps };
}
