/**
 * Lag reads for a poller that asks every second (the gateway's lane-lag monitor): records waiting
 * per topic for share groups (DescribeShareGroupOffsets) and consumer groups (OffsetFetch), at the
 * least cost to the broker.
 *
 * - Topic metadata (partitions, leaders) and each group's coordinator are kept between reads and
 *   asked again only after an error that says they moved (NOT_COORDINATOR, UNKNOWN_TOPIC…, a
 *   leader change, a topic id that changed), or once `maxAgeMs` has passed.
 * - Reads asked in the same turn of the event loop go out together: one DescribeShareGroupOffsets
 *   and one OffsetFetch per coordinator for all their groups, one ListOffsets (latest) per
 *   partition leader for every partition that needs its high watermark, none when the share
 *   coordinator gave every partition's lag.
 * - Low watermarks (needed only where a group has no start offset or commit) are kept until the
 *   next metadata refresh.
 * - Connections stay open; a failed request drops them all, and everything is asked afresh.
 *
 * Needs a broker with ListOffsets v9 and OffsetFetch v9 (Kafka 3.9+; share groups need 4.1+ anyway).
 */
import { listOffsetsV9, offsetFetchV9 } from "@platformatic/kafka";
import type { AdminOptions } from "./admin.ts";
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { describeShareGroupOffsetsApi } from "./generated/describe-share-group-offsets.ts";
import {
  consumerBacklog,
  consumerNeed,
  partitionKey,
  shareBacklog,
  shareNeed,
  type CommittedOffset,
  type Need,
  type SharePartitionState,
  type Watermarks,
} from "./lag-math.ts";
import { call } from "./protocol/call.ts";

export interface LagReaderOptions extends AdminOptions {
  /** How long topic metadata, coordinators and low watermarks are trusted without an error (default 30 s). */
  readonly maxAgeMs?: number;
}

/** Reads how many records wait for a group, per topic. */
export interface LagReader {
  /**
   * Records waiting for share group `groupId` per topic of `topics`: the share coordinator's lag
   * per partition (KIP-1226), else high watermark − start offset, from the low watermark where the
   * group has no state yet (a group that does not exist: every record). Rejects when the broker
   * cannot tell (a missing topic, a moved coordinator: the next read asks again).
   */
  shareGroupLag(groupId: string, topics: readonly string[]): Promise<Map<string, number>>;
  /** Records waiting for consumer group `groupId` per topic: high watermark − commit, from the low watermark without one. */
  consumerGroupLag(groupId: string, topics: readonly string[]): Promise<Map<string, number>>;
  /** Requests sent so far by API name (Metadata, FindCoordinator, …): a debug counter for tests and benchmarks. */
  readonly requests: ReadonlyMap<string, number>;
  close(): Promise<void>;
}

type Kind = "share" | "consumer";

interface Ask {
  readonly kind: Kind;
  readonly groupId: string;
  readonly topics: readonly string[];
  resolve(lag: Map<string, number>): void;
  reject(err: unknown): void;
}

/** One group's part of a round: what it asked, what the coordinator said, or why it failed. */
interface GroupRead {
  readonly kind: Kind;
  readonly groupId: string;
  readonly topics: string[];
  readonly asks: Ask[];
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
async function decoded<T>(request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (err) {
    const response = (err as { response?: unknown }).response as T | undefined;
    if (response === undefined) throw err;
    return response;
  }
}

/**
 * A lag reader over connections kept between reads (see the module comment for what it saves).
 *
 * @example const lag = createLagReader({ brokers: ["127.0.0.1:9092"] });
 *   const waiting = await lag.shareGroupLag("shoal-pool-default", ["shoal.jobs.default.interactive"]);
 */
export function createLagReader(opts: LagReaderOptions): LagReader {
  const maxAgeMs = opts.maxAgeMs ?? 30_000;
  const newCluster = (): Cluster =>
    new Cluster({
      brokers: opts.brokers,
      clientId: opts.clientId ?? "kafka-share-lag",
      connectTimeoutMs: 5_000,
      requestTimeoutMs: 10_000,
      ...(opts.security ? { security: opts.security } : {}),
    });
  let cluster = newCluster();
  const requests = new Map<string, number>();
  const coordinators = new Map<string, number>();
  const lows = new Map<string, bigint>();
  let metadataAt = Number.NEGATIVE_INFINITY;
  let metadataStale = true;
  let queue: Ask[] = [];
  let scheduled = false;
  let closed = false;

  const count = (api: string): void => void requests.set(api, (requests.get(api) ?? 0) + 1);
  const forgetAll = (): void => {
    coordinators.clear();
    lows.clear();
    metadataStale = true;
  };

  function ask(kind: Kind, groupId: string, topics: readonly string[]): Promise<Map<string, number>> {
    if (closed) return Promise.reject(new Error("the lag reader is closed"));
    return new Promise((resolve, reject) => {
      queue.push({ kind, groupId, topics, resolve, reject });
      if (scheduled) return;
      scheduled = true;
      setImmediate(() => {
        scheduled = false;
        const batch = queue;
        queue = [];
        void runRound(batch);
      });
    });
  }

  async function runRound(batch: Ask[]): Promise<void> {
    const used = cluster;
    try {
      if (closed) throw new Error("the lag reader is closed");
      await round(used, batch);
      // Closed while the round ran: close what it may have reopened.
      if (closed) await used.close().catch(() => {});
    } catch (err) {
      // A request failed outright (connection lost, timeout): every read of the round fails, and
      // the next one starts from fresh connections, metadata and coordinators.
      for (const a of batch) a.reject(err);
      if (cluster === used) {
        cluster = newCluster();
        forgetAll();
        await used.close(true).catch(() => {});
      }
    }
  }

  async function round(c: Cluster, batch: Ask[]): Promise<void> {
    const now = Date.now();
    const groups = new Map<string, GroupRead>();
    for (const a of batch) {
      const key = `${a.kind}:${a.groupId}`;
      const g = groups.get(key) ?? { kind: a.kind, groupId: a.groupId, topics: [], asks: [] };
      groups.set(key, g);
      g.asks.push(a);
      for (const t of a.topics) if (!g.topics.includes(t)) g.topics.push(t);
    }
    const all = [...groups.values()];
    const fail = (g: GroupRead, err: unknown): void => {
      g.failed ??= err;
    };

    // Topic metadata: kept until an error says it moved, or it is maxAgeMs old.
    const topics = [...new Set(all.flatMap((g) => g.topics))];
    const aged = now - metadataAt > maxAgeMs;
    let missing = new Set<string>();
    if (metadataStale || aged || topics.some((t) => !c.topicByName(t))) {
      count("Metadata");
      missing = await c.refreshMetadata(topics);
      metadataAt = now;
      metadataStale = missing.size > 0;
      lows.clear();
      if (aged) coordinators.clear();
    }
    for (const g of all) {
      const gone = g.topics.find((t) => missing.has(t));
      if (gone) fail(g, new KafkaProtocolError("Metadata", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, gone));
    }

    // Coordinators: one FindCoordinator for every group without one.
    const unknown = [...new Set(all.filter((g) => !g.failed && !coordinators.has(g.groupId)).map((g) => g.groupId))];
    if (unknown.length > 0) {
      count("FindCoordinator");
      const found = await c.findCoordinators(unknown);
      for (const id of unknown) {
        const node = found.get(id);
        if (typeof node === "number") coordinators.set(id, node);
      }
      for (const g of all) {
        const node = found.get(g.groupId);
        if (unknown.includes(g.groupId) && typeof node !== "number") fail(g, node ?? new KafkaProtocolError("FindCoordinator", -1, "no answer for the group"));
      }
    }

    // Offsets: one request per coordinator and kind.
    const byCoordinator = new Map<string, GroupRead[]>();
    for (const g of all) {
      if (g.failed) continue;
      const key = `${g.kind}:${coordinators.get(g.groupId)!}`;
      byCoordinator.set(key, [...(byCoordinator.get(key) ?? []), g]);
    }
    await Promise.all(
      [...byCoordinator].map(([key, gs]) => {
        const node = Number(key.slice(key.indexOf(":") + 1));
        return gs[0]!.kind === "share" ? describeShare(c, node, gs) : fetchCommitted(c, node, gs);
      }),
    );

    // Watermarks: one ListOffsets per leader for high watermarks, one more where a low one is missing.
    const needs = new Map<string, { topic: string; partition: number; need: Need; groups: GroupRead[] }>();
    for (const g of all) {
      if (g.failed) continue;
      const parts: Array<{ topic: string; partition: number; need: Need }> =
        g.kind === "share" ? g.share!.map((p) => ({ ...p, need: shareNeed(p) })) : g.committed!.map((p) => ({ ...p, need: consumerNeed(p) }));
      for (const p of parts) {
        if (p.need === "none") continue;
        const k = partitionKey(p.topic, p.partition);
        const n = needs.get(k) ?? { topic: p.topic, partition: p.partition, need: p.need, groups: [] };
        if (p.need === "both") n.need = "both";
        n.groups.push(g);
        needs.set(k, n);
      }
    }
    const ends = await listOffsets(c, [...needs.values()], fail);

    for (const g of all) {
      if (g.failed) {
        for (const a of g.asks) a.reject(g.failed);
        continue;
      }
      try {
        const lag = g.kind === "share" ? shareBacklog(g.topics, g.share!, ends) : consumerBacklog(g.topics, g.committed!, ends);
        for (const a of g.asks) a.resolve(new Map(a.topics.map((t) => [t, lag.get(t) ?? 0])));
      } catch (err) {
        for (const a of g.asks) a.reject(err);
      }
    }
  }

  /** The partitions of `topics` as the cached metadata has them. */
  function partitionsOf(c: Cluster, topic: string): number[] {
    return [...(c.topicByName(topic)?.leaders.keys() ?? [])].sort((a, b) => a - b);
  }

  function coordinatorError(g: GroupRead, api: string, code: number, message?: string | null): void {
    if (COORDINATOR_MOVED.has(code)) coordinators.delete(g.groupId);
    g.failed ??= new KafkaProtocolError(api, code, message);
  }

  function partitionError(g: GroupRead, api: string, code: number, where: string): void {
    if (METADATA_MOVED.has(code)) metadataStale = true;
    g.failed ??= new KafkaProtocolError(api, code, where);
  }

  async function describeShare(c: Cluster, node: number, gs: GroupRead[]): Promise<void> {
    const range = (await c.apiVersions(node)).get(describeShareGroupOffsetsApi.apiKey);
    if (!range) {
      const err = new KafkaProtocolError("DescribeShareGroupOffsets", 35, "the coordinator does not support it (share groups off?)");
      for (const g of gs) g.failed ??= err;
      return;
    }
    const version = Math.min(range.max, describeShareGroupOffsetsApi.maxVersion); // v0 decodes Lag as -1
    const conn = await c.connection(node, "coordinator");
    count("DescribeShareGroupOffsets");
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
        coordinatorError(g, "DescribeShareGroupOffsets", r.errorCode, r.errorMessage);
        continue;
      }
      const parts: SharePartitionState[] = [];
      for (const t of r.topics) {
        // The broker names topics by their current id: another id than ours means deleted and re-created.
        if (t.topicId !== c.topicByName(t.topicName)?.id) {
          metadataStale = true;
          for (const k of [...lows.keys()]) if (k.startsWith(`${t.topicName}:`)) lows.delete(k);
        }
        for (const p of t.partitions) {
          if (p.errorCode !== ErrorCode.NONE) partitionError(g, "DescribeShareGroupOffsets", p.errorCode, `${t.topicName}-${p.partitionIndex}`);
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

  async function fetchCommitted(c: Cluster, node: number, gs: GroupRead[]): Promise<void> {
    const conn = await c.connection(node, "coordinator");
    count("OffsetFetch");
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
        coordinatorError(g, "OffsetFetch", r.errorCode);
        continue;
      }
      const committed: CommittedOffset[] = [];
      for (const t of r.topics) {
        for (const p of t.partitions) {
          if (p.errorCode !== ErrorCode.NONE) partitionError(g, "OffsetFetch", p.errorCode, `${t.name}-${p.partitionIndex}`);
          committed.push({ topic: t.name, partition: p.partitionIndex, offset: p.committedOffset });
        }
      }
      g.committed = committed;
    }
  }

  async function listOffsets(
    c: Cluster,
    needs: Array<{ topic: string; partition: number; need: Need; groups: GroupRead[] }>,
    fail: (g: GroupRead, err: unknown) => void,
  ): Promise<Map<string, Watermarks>> {
    const high = new Map<string, bigint>();
    // leader → timestamp → partitions
    const plan = new Map<number, Map<bigint, typeof needs>>();
    const put = (leader: number, ts: bigint, n: (typeof needs)[number]): void => {
      const byTs = plan.get(leader) ?? new Map<bigint, typeof needs>();
      plan.set(leader, byTs);
      byTs.set(ts, [...(byTs.get(ts) ?? []), n]);
    };
    for (const n of needs) {
      const leader = c.topicByName(n.topic)?.leaders.get(n.partition) ?? -1;
      if (leader < 0) {
        metadataStale = true;
        for (const g of n.groups) fail(g, new KafkaProtocolError("Metadata", ErrorCode.LEADER_NOT_AVAILABLE, `${n.topic}-${n.partition}`));
        continue;
      }
      put(leader, LATEST, n);
      if (n.need === "both" && !lows.has(partitionKey(n.topic, n.partition))) put(leader, EARLIEST, n);
    }
    await Promise.all(
      [...plan].flatMap(([leader, byTs]) =>
        [...byTs].map(async ([ts, ns]) => {
          const byTopic = new Map<string, number[]>();
          for (const n of ns) byTopic.set(n.topic, [...(byTopic.get(n.topic) ?? []), n.partition]);
          const conn = await c.connection(leader, "fetch");
          count("ListOffsets");
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
                for (const g of n?.groups ?? []) partitionError(g, "ListOffsets", p.errorCode, `${t.name}-${p.partitionIndex}`);
                continue;
              }
              if (ts === LATEST) high.set(k, p.offset);
              else lows.set(k, p.offset);
            }
          }
        }),
      ),
    );
    const out = new Map<string, Watermarks>();
    for (const [k, h] of high) {
      const low = lows.get(k);
      // A high watermark below the low one we kept: the topic was re-created; read it again next time.
      if (low !== undefined && h < low) {
        lows.delete(k);
        metadataStale = true;
        out.set(k, { high: h, low: 0n });
        continue;
      }
      out.set(k, low === undefined ? { high: h } : { high: h, low });
    }
    return out;
  }

  return {
    requests,
    shareGroupLag: (groupId, topics) => ask("share", groupId, topics),
    consumerGroupLag: (groupId, topics) => ask("consumer", groupId, topics),
    async close() {
      closed = true;
      await cluster.close();
    },
  };
}
