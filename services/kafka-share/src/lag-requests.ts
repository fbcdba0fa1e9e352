/**
 * The requests of one lag-reader round (lag-reader.ts): DescribeShareGroupOffsets and OffsetFetch
 * at a coordinator for all its groups, ListOffsets at a leader for all its partitions. Errors that
 * say the cached coordinator or metadata moved are reported through the round's context.
 */
import { listOffsetsV9, offsetFetchV9 } from "@platformatic/kafka";
import type { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { describeShareGroupOffsetsApi } from "./generated/describe-share-group-offsets.ts";
import { partitionKey, type CommittedOffset, type Need, type SharePartitionState, type Watermarks } from "./lag-math.ts";
import { call } from "./protocol/call.ts";

/** What a round's requests read and update of the reader's state. */
export interface RoundContext {
  readonly cluster: Cluster;
  /** Low watermarks kept between rounds, by partitionKey. */
  readonly lows: Map<string, bigint>;
  /** Counts one request of `api` (the reader's debug counter). */
  count(api: string): void;
  /** Topic metadata must be asked again before the next read. */
  metadataMoved(): void;
  /** `groupId`'s coordinator must be asked again. */
  coordinatorMoved(groupId: string): void;
}

/** A partition whose watermarks some groups of the round need. */
export interface WatermarkNeed {
  readonly topic: string;
  readonly partition: number;
  need: Need;
  readonly groups: GroupRead[];
}

/** One group's part of a round: what it asked, what the coordinator said, or why it failed. */
export interface GroupRead {
  readonly kind: "share" | "consumer";
  readonly groupId: string;
  readonly topics: string[];
  failed?: unknown;
  share?: SharePartitionState[];
  committed?: CommittedOffset[];
}

/** Error codes after which the cached coordinator is asked again. */
const COORDINATOR_MOVED = new Set<number>([ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE]);
/** Error codes after which topic metadata is asked again. */
const METADATA_MOVED = new Set<number>([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.UNKNOWN_TOPIC_ID,
  74, // FENCED_LEADER_EPOCH
  75, // UNKNOWN_LEADER_EPOCH
]);
const GROUP_ID_NOT_FOUND = 69;
const LATEST = -1n;
const EARLIEST = -2n;

/** platformatic's APIs throw on a non-zero code with the decoded response attached: take it. */
export async function decoded<T>(request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (err) {
    const response = (err as { response?: unknown }).response as T | undefined;
    if (response === undefined) throw err;
    return response;
  }
}

/** The partitions of `topics` as the cached metadata has them. */
function partitionsOf(c: Cluster, topic: string): number[] {
  return [...(c.topicByName(topic)?.leaders.keys() ?? [])].sort((a, b) => a - b);
}

function coordinatorError(ctx: RoundContext, g: GroupRead, api: string, code: number, message?: string | null): void {
  if (COORDINATOR_MOVED.has(code)) ctx.coordinatorMoved(g.groupId);
  g.failed ??= new KafkaProtocolError(api, code, message);
}

function partitionError(ctx: RoundContext, g: GroupRead, api: string, code: number, where: string): void {
  if (METADATA_MOVED.has(code)) ctx.metadataMoved();
  g.failed ??= new KafkaProtocolError(api, code, where);
}

/** One DescribeShareGroupOffsets to `node` for the share groups `gs` it coordinates: fills each one's `share`, or `failed`. */
export async function describeShareOffsets(ctx: RoundContext, node: number, gs: readonly GroupRead[]): Promise<void> {
  const c = ctx.cluster;
  const range = (await c.apiVersions(node)).get(describeShareGroupOffsetsApi.apiKey);
  if (!range) {
    const err = new KafkaProtocolError("DescribeShareGroupOffsets", 35, "the coordinator does not support it (share groups off?)");
    for (const g of gs) g.failed ??= err;
    return;
  }
  const version = Math.min(range.max, describeShareGroupOffsetsApi.maxVersion); // v0 decodes Lag as -1
  const conn = await c.connection(node, "coordinator");
  ctx.count("DescribeShareGroupOffsets");
  const res = await call(conn, describeShareGroupOffsetsApi, version, {
    groups: gs.map((g) => ({ groupId: g.groupId, topics: g.topics.map((t) => ({ topicName: t, partitions: partitionsOf(c, t) })) })),
  });
  for (const g of gs) {
    const r = res.groups.find((x) => x.groupId === g.groupId);
    if (!r) {
      g.failed ??= new KafkaProtocolError("DescribeShareGroupOffsets", -1, `no answer for ${g.groupId}`);
      continue;
    }
    if (r.errorCode === GROUP_ID_NOT_FOUND) {
      // Nothing was ever read: no state on any partition.
      g.share = g.topics.flatMap((topic) => partitionsOf(c, topic).map((partition) => ({ topic, partition, startOffset: -1n })));
      continue;
    }
    if (r.errorCode !== ErrorCode.NONE) {
      coordinatorError(ctx, g, "DescribeShareGroupOffsets", r.errorCode, r.errorMessage);
      continue;
    }
    const parts: SharePartitionState[] = [];
    for (const t of r.topics) {
      // The broker names topics by their current id: another id than ours means deleted and re-created.
      if (t.topicId !== c.topicByName(t.topicName)?.id) {
        ctx.metadataMoved();
        for (const k of [...ctx.lows.keys()]) if (k.startsWith(`${t.topicName}:`)) ctx.lows.delete(k);
      }
      for (const p of t.partitions) {
        if (p.errorCode !== ErrorCode.NONE) partitionError(ctx, g, "DescribeShareGroupOffsets", p.errorCode, `${t.topicName}-${p.partitionIndex}`);
        parts.push({
          topic: t.topicName,
          partition: p.partitionIndex,
          startOffset: p.startOffset,
          ...(p.lag !== undefined && p.lag >= 0n ? { lag: p.lag } : {}),
        });
      }
    }
    g.share = parts;
  }
}

/** One OffsetFetch to `node` for the consumer groups `gs` it coordinates: fills each one's `committed`, or `failed`. */
export async function fetchCommittedOffsets(ctx: RoundContext, node: number, gs: readonly GroupRead[]): Promise<void> {
  const c = ctx.cluster;
  const conn = await c.connection(node, "coordinator");
  ctx.count("OffsetFetch");
  const res = await decoded(
    offsetFetchV9.api.async(
      conn,
      gs.map((g) => ({
        groupId: g.groupId,
        memberId: null,
        memberEpoch: -1,
        topics: g.topics.map((name) => ({ name, partitionIndexes: partitionsOf(c, name) })),
      })),
      false,
    ),
  );
  for (const g of gs) {
    const r = res.groups.find((x) => x.groupId === g.groupId);
    if (!r) {
      g.failed ??= new KafkaProtocolError("OffsetFetch", -1, `no answer for ${g.groupId}`);
      continue;
    }
    if (r.errorCode !== ErrorCode.NONE) {
      coordinatorError(ctx, g, "OffsetFetch", r.errorCode);
      continue;
    }
    const committed: CommittedOffset[] = [];
    for (const t of r.topics) {
      for (const p of t.partitions) {
        if (p.errorCode !== ErrorCode.NONE) partitionError(ctx, g, "OffsetFetch", p.errorCode, `${t.name}-${p.partitionIndex}`);
        committed.push({ topic: t.name, partition: p.partitionIndex, offset: p.committedOffset });
      }
    }
    g.committed = committed;
  }
}

/**
 * High watermarks of every partition in `needs` (one ListOffsets per leader), and the low ones
 * `ctx.lows` lacks where a partition needs both (one more per leader). A partition that cannot be
 * read fails the groups that need it.
 */
export async function readWatermarks(ctx: RoundContext, needs: readonly WatermarkNeed[]): Promise<Map<string, Watermarks>> {
  const c = ctx.cluster;
  const fail = (g: GroupRead, err: unknown): void => {
    g.failed ??= err;
  };
  const high = new Map<string, bigint>();
  // leader → timestamp → partitions
  const plan = new Map<number, Map<bigint, WatermarkNeed[]>>();
  const put = (leader: number, ts: bigint, n: WatermarkNeed): void => {
    const byTs = plan.get(leader) ?? new Map<bigint, WatermarkNeed[]>();
    plan.set(leader, byTs);
    byTs.set(ts, [...(byTs.get(ts) ?? []), n]);
  };
  for (const n of needs) {
    const leader = c.topicByName(n.topic)?.leaders.get(n.partition) ?? -1;
    if (leader < 0) {
      ctx.metadataMoved();
      for (const g of n.groups) fail(g, new KafkaProtocolError("Metadata", ErrorCode.LEADER_NOT_AVAILABLE, `${n.topic}-${n.partition}`));
      continue;
    }
    put(leader, LATEST, n);
    if (n.need === "both" && !ctx.lows.has(partitionKey(n.topic, n.partition))) put(leader, EARLIEST, n);
  }
  await Promise.all(
    [...plan].flatMap(([leader, byTs]) =>
      [...byTs].map(async ([ts, ns]) => {
        const byTopic = new Map<string, number[]>();
        for (const n of ns) byTopic.set(n.topic, [...(byTopic.get(n.topic) ?? []), n.partition]);
        const conn = await c.connection(leader, "fetch");
        ctx.count("ListOffsets");
        const res = await decoded(
          listOffsetsV9.api.async(
            conn,
            -1,
            0,
            [...byTopic].map(([name, ps]) => ({ name, partitions: ps.map((partitionIndex) => ({ partitionIndex, currentLeaderEpoch: -1, timestamp: ts })) })),
          ),
        );
        for (const t of res.topics) {
          for (const p of t.partitions) {
            const k = partitionKey(t.name, p.partitionIndex);
            if (p.errorCode !== ErrorCode.NONE) {
              const n = ns.find((x) => x.topic === t.name && x.partition === p.partitionIndex);
              for (const g of n?.groups ?? []) partitionError(ctx, g, "ListOffsets", p.errorCode, `${t.name}-${p.partitionIndex}`);
              continue;
            }
            if (ts === LATEST) high.set(k, p.offset);
            else ctx.lows.set(k, p.offset);
          }
        }
      }),
    ),
  );
  const out = new Map<string, Watermarks>();
  for (const [k, h] of high) {
    const low = ctx.lows.get(k);
    // A high watermark below the low one we kept: the topic was re-created; read it again next time.
    if (low !== undefined && h < low) {
      ctx.lows.delete(k);
      ctx.metadataMoved();
      out.set(k, { high: h, low: 0n });
      continue;
    }
    out.set(k, low === undefined ? { high: h } : { high: h, low });
  }
  return out;
}
