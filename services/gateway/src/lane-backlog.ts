import type { IntakeKind } from "@shoal/common";
import type { LagReader } from "@shoal/kafka-share";

/**
 * Reads how many records of each of `topics` wait for the group `groupId`: records per topic.
 * Throws when the broker cannot tell (the caller keeps its last figure).
 */
export type BacklogSource = (groupId: string, topics: readonly string[]) => Promise<Map<string, number>>;

/**
 * Each intake's backlog, read the way it consumes, over one lag reader (@shoal/kafka-share's
 * createLagReader: coordinators and metadata kept between polls, every pool's read of a poll in
 * one request per coordinator and one ListOffsets per leader).
 *
 * - share: the share coordinator's lag per partition (DescribeShareGroupOffsets v1, KIP-1226:
 *   records from the share-partition start offset to the high watermark not yet acknowledged;
 *   records a worker holds under a lock count until it settles them). Consumer-group offsets mean
 *   nothing here: a share group commits none. Where the broker gives no lag (nothing acknowledged
 *   on that partition yet, or a v0 broker): high watermark − start offset, from the low watermark
 *   without a start offset (workers read share groups from the earliest offset).
 * - group: high watermark − committed offset per partition, from the low watermark without a commit.
 */
export function backlogSources(reader: Pick<LagReader, "shareGroupLag" | "consumerGroupLag">): Record<IntakeKind, BacklogSource> {
  return {
    share: (groupId, topics) => reader.shareGroupLag(groupId, topics),
    group: (groupId, topics) => reader.consumerGroupLag(groupId, topics),
  };
}
