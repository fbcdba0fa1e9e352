/**
 * When the oldest record a share group has not settled was written (lag-reader.ts,
 * shareGroupHeads). DescribeShareGroupOffsets gives the share-partition start offset and the lag
 * (records from it to the high watermark not yet acknowledged, acquired ones included); one plain
 * Fetch per partition leader, from the start offset, reads the records and the high watermark. The
 * start offset the share coordinator keeps can trail the leader's (records just past it may be
 * acknowledged already: e2e/kafka-share/offsets.test.ts), so the head is taken at high watermark −
 * lag: exact while records are settled in order, and never older than the true head (records
 * settled out of order make it younger). A plain Fetch takes no lock and changes nothing in the group.
 */
import { fetchV17, type RecordsBatch } from "@platformatic/kafka";
import { ErrorCode } from "./errors.ts";
import { decoded, type RoundContext } from "./lag-requests.ts";
import { partitionKey } from "./lag-math.ts";

/** A partition whose head is asked for: the group's start offset and lag there. */
export interface HeadNeed {
  readonly topic: string;
  readonly partition: number;
  readonly startOffset: bigint;
  /** The broker's lag (KIP-1226); without it the head is taken at the start offset. */
  readonly lag?: bigint;
}

/** Where the head is: high watermark − lag, not before the start offset; undefined when nothing waits. */
export function headOffset(need: HeadNeed, highWatermark: bigint): bigint | undefined {
  if (need.lag === undefined) return need.startOffset < highWatermark ? need.startOffset : undefined;
  if (need.lag <= 0n) return undefined;
  const at = highWatermark - need.lag;
  // biome-ignore lint/complexity/useMathMinMax: bigints (Math.max takes numbers)
  return at > need.startOffset ? at : need.startOffset;
}

/**
 * Bytes read per partition from the start offset: the head's batch when the start offset trails by
 * a few batches of job envelopes. A head beyond it, or in a batch cut short (a fetch returns a whole
 * first batch only for its first partition, KIP-74), is unknown this time.
 */
export const HEAD_PARTITION_BYTES = 64 * 1024;
const FETCH_API_KEY = 1;
const CONTROL_BATCH = 0x20;
const LOG_APPEND_TIME = 0x08;

/** The CreateTime (or LogAppendTime) of the record at `offset` in `batches` (or the first after it), if they hold it. */
export function timestampAt(batches: readonly RecordsBatch[], offset: bigint): number | undefined {
  for (const b of batches) {
    if ((b.attributes & CONTROL_BATCH) !== 0) continue;
    for (const r of b.records) {
      // The first record at or after `offset` (compaction may have removed the record at it).
      if (b.firstOffset + BigInt(r.offsetDelta) < offset) continue;
      // A LogAppendTime topic stamps the whole batch with its append time.
      return Number((b.attributes & LOG_APPEND_TIME) !== 0 ? b.maxTimestamp : b.firstTimestamp + r.timestampDelta);
    }
  }
  return undefined;
}

/**
 * Timestamps of the head record of each partition in `needs`, by partitionKey: one Fetch (no wait,
 * no session) per leader. A partition without a readable head (empty, cut short, an error) is left out;
 * an error that says the metadata moved asks for it again next round.
 */
export async function readHeads(ctx: RoundContext, needs: readonly HeadNeed[]): Promise<Map<string, number>> {
  const c = ctx.cluster;
  const out = new Map<string, number>();
  const byLeader = new Map<number, HeadNeed[]>();
  for (const n of needs) {
    const leader = c.topicByName(n.topic)?.leaders.get(n.partition) ?? -1;
    if (leader < 0) {
      ctx.metadataMoved();
      continue;
    }
    byLeader.set(leader, [...(byLeader.get(leader) ?? []), n]);
  }
  await Promise.all(
    [...byLeader].map(async ([leader, ns]) => {
      const range = (await c.apiVersions(leader)).get(FETCH_API_KEY);
      if (!range || range.max < 17) return; // Fetch v17 (topic ids): Kafka 3.9+, as share groups need anyway.
      const byTopic = new Map<string, HeadNeed[]>();
      for (const n of ns) byTopic.set(n.topic, [...(byTopic.get(n.topic) ?? []), n]);
      const topics = [...byTopic].flatMap(([name, ps]) => {
        const id = c.topicByName(name)?.id;
        if (id === undefined) return [];
        return [
          {
            topicId: id,
            partitions: ps.map((p) => ({
              partition: p.partition,
              currentLeaderEpoch: -1,
              fetchOffset: p.startOffset,
              lastFetchedEpoch: -1,
              partitionMaxBytes: HEAD_PARTITION_BYTES,
            })),
          },
        ];
      });
      if (topics.length === 0) return;
      const conn = await c.connection(leader, "fetch");
      ctx.count("Fetch");
      // No wait, no minimum, no fetch session (epoch -1), read uncommitted: what a share group reads.
      const res = await decoded(fetchV17.api.async(conn, 0, 0, HEAD_PARTITION_BYTES * ns.length, 0, 0, -1, topics, [], ""));
      for (const t of res.responses) {
        const name = c.topicById(t.topicId)?.name;
        if (name === undefined) continue;
        for (const p of t.partitions) {
          if (p.errorCode !== ErrorCode.NONE) {
            ctx.metadataMoved();
            continue;
          }
          const need = byTopic.get(name)?.find((n) => n.partition === p.partitionIndex);
          if (!need) continue;
          const at = headOffset(need, p.highWatermark);
          const ts = at === undefined ? undefined : timestampAt(p.records ?? [], at);
          if (ts !== undefined) out.set(partitionKey(name, p.partitionIndex), ts);
        }
      }
    }),
  );
  return out;
}
