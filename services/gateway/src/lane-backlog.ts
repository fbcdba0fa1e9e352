import type { Admin } from "kafkajs";
import type { ShareGroupAdmin } from "@shoal/kafka-share";

/**
 * Reads how many records of each of `topics` wait for the group `groupId`: records per topic.
 * Throws when the broker cannot tell (the caller keeps its last figure).
 */
export type BacklogSource = (groupId: string, topics: readonly string[]) => Promise<Map<string, number>>;

/**
 * A consumer group's backlog: high watermark − committed offset per partition (from the low
 * watermark where nothing was committed yet), with kafkajs.
 */
export function consumerGroupBacklog(admin: Pick<Admin, "fetchTopicOffsets" | "fetchOffsets">): BacklogSource {
  return async (groupId, topics) => {
    const [ends, committed] = await Promise.all([
      Promise.all(topics.map((t) => admin.fetchTopicOffsets(t))),
      admin.fetchOffsets({ groupId, topics: [...topics] }),
    ]);
    const out = new Map<string, number>();
    topics.forEach((topic, i) => {
      const done = new Map((committed.find((c) => c.topic === topic)?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      let records = 0;
      for (const p of ends[i] ?? []) {
        const c = done.get(p.partition) ?? -1;
        // No commit yet: everything from the low watermark on is waiting.
        records += Math.max(0, Number(p.high) - (c >= 0 ? c : Number(p.low)));
      }
      out.set(topic, records);
    });
    return out;
  };
}

/**
 * A share group's backlog: the share coordinator's lag per partition (DescribeShareGroupOffsets v1,
 * KIP-1226: records from the share-partition start offset to the high watermark not yet
 * acknowledged; records a worker holds under a lock count until it settles them). Consumer-group
 * offsets mean nothing here: kafkajs answers -1 for a share group, which would count every record
 * ever produced. Where the broker gives no lag (the group has not acknowledged anything on that
 * partition yet, or a v0 broker) the backlog is high watermark − start offset, from the low
 * watermark when there is no start offset (workers read share groups from the earliest offset).
 */
export function shareGroupBacklog(admin: Pick<Admin, "fetchTopicOffsets">, shareAdmin: Pick<ShareGroupAdmin, "describeShareGroupOffsets">): BacklogSource {
  return async (groupId, topics) => {
    const parts = await shareAdmin.describeShareGroupOffsets(groupId, topics);
    const out = new Map<string, number>();
    for (const topic of topics) {
      const mine = parts.filter((p) => p.topic === topic);
      let records = mine.reduce((n, p) => n + Number(p.lag ?? 0n), 0);
      const unknown = new Map(mine.filter((p) => p.lag === undefined).map((p) => [p.partition, p.startOffset]));
      if (unknown.size > 0 || mine.length === 0) {
        for (const e of await admin.fetchTopicOffsets(topic)) {
          if (mine.length > 0 && !unknown.has(e.partition)) continue;
          const start = unknown.get(e.partition) ?? -1n;
          records += Math.max(0, Number(e.high) - (start >= 0n ? Number(start) : Number(e.low)));
        }
      }
      out.set(topic, records);
    }
    return out;
  };
}
