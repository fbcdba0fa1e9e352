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
import type { AdminOptions } from "./admin.ts";
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { consumerBacklog, consumerNeed, partitionKey, shareBacklog, shareNeed, topicOfKey, type Need } from "./lag-math.ts";
import { readHeads, type HeadNeed } from "./head-requests.ts";
import { describeShareOffsets, fetchCommittedOffsets, readWatermarks, type GroupRead, type RoundContext, type WatermarkNeed } from "./lag-requests.ts";

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
  /**
   * shareGroupLag with, per topic, when its oldest record not yet settled by the group was written
   * (the head: waiting, or held by a member): one more Fetch per partition leader, from the group's
   * start offset, read at high watermark − lag (head-requests.ts). For a worker that takes the
   * model whose jobs waited longest.
   */
  shareGroupHeads(groupId: string, topics: readonly string[]): Promise<Map<string, QueueHead>>;
  /** Records waiting for consumer group `groupId` per topic: high watermark − commit, from the low watermark without one. */
  consumerGroupLag(groupId: string, topics: readonly string[]): Promise<Map<string, number>>;
  /** Requests sent so far by API name (Metadata, FindCoordinator, …): a debug counter for tests and benchmarks. */
  readonly requests: ReadonlyMap<string, number>;
  close(): Promise<void>;
}

/** A topic's queue for a share group: records not yet settled, and when the oldest was written. */
export interface QueueHead {
  readonly waiting: number;
  /** The head record's timestamp (ms since the epoch); absent when nothing waits or it could not be read. */
  readonly oldestMs?: number;
}

type Kind = "share" | "consumer";

interface Ask {
  readonly kind: Kind;
  readonly groupId: string;
  readonly topics: readonly string[];
  /** Also read the head records' timestamps (shareGroupHeads). */
  readonly heads?: boolean;
  resolve(lag: Map<string, number>, heads: ReadonlyMap<string, number>): void;
  reject(err: unknown): void;
}

/** A group's part of a round, with the reads that asked for it. */
interface RoundGroup extends GroupRead {
  readonly asks: Ask[];
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

  function ask(
    kind: Kind,
    groupId: string,
    topics: readonly string[],
    heads = false,
  ): Promise<{ lag: Map<string, number>; heads: ReadonlyMap<string, number> }> {
    if (closed) return Promise.reject(new Error("the lag reader is closed"));
    return new Promise((resolve, reject) => {
      queue.push({ kind, groupId, topics, heads, resolve: (lag, h) => resolve({ lag, heads: h }), reject });
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
    const ctx: RoundContext = {
      cluster: c,
      lows,
      count,
      metadataMoved: () => {
        metadataStale = true;
      },
      coordinatorMoved: (groupId) => void coordinators.delete(groupId),
    };
    const groups = new Map<string, RoundGroup>();
    for (const a of batch) {
      const key = `${a.kind}:${a.groupId}`;
      const g = groups.get(key) ?? { kind: a.kind, groupId: a.groupId, topics: [], asks: [] };
      groups.set(key, g);
      g.asks.push(a);
      for (const t of a.topics) if (!g.topics.includes(t)) g.topics.push(t);
    }
    const all = [...groups.values()];
    const fail = (g: RoundGroup, err: unknown): void => {
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
    const byCoordinator = new Map<string, RoundGroup[]>();
    for (const g of all) {
      if (g.failed) continue;
      const key = `${g.kind}:${coordinators.get(g.groupId)!}`;
      byCoordinator.set(key, [...(byCoordinator.get(key) ?? []), g]);
    }
    await Promise.all(
      [...byCoordinator].map(([key, gs]) => {
        const node = Number(key.slice(key.indexOf(":") + 1));
        return gs[0]!.kind === "share" ? describeShareOffsets(ctx, node, gs) : fetchCommittedOffsets(ctx, node, gs);
      }),
    );

    // Watermarks: one ListOffsets per leader for high watermarks, one more where a low one is missing.
    const needs = new Map<string, WatermarkNeed>();
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
    const ends = await readWatermarks(ctx, [...needs.values()]);

    // Heads: one Fetch per leader, for the share groups some read asked them of.
    const headNeeds: HeadNeed[] = [];
    for (const g of all) {
      if (g.failed || g.kind !== "share" || !g.asks.some((a) => a.heads)) continue;
      for (const p of g.share!) if (p.startOffset >= 0n && p.lag !== 0n) headNeeds.push(p);
    }
    const heads = headNeeds.length > 0 ? await readHeads(ctx, headNeeds) : new Map<string, number>();

    for (const g of all) {
      if (g.failed) {
        for (const a of g.asks) a.reject(g.failed);
        continue;
      }
      try {
        const lag = g.kind === "share" ? shareBacklog(g.topics, g.share!, ends) : consumerBacklog(g.topics, g.committed!, ends);
        for (const a of g.asks) a.resolve(new Map(a.topics.map((t) => [t, lag.get(t) ?? 0])), heads);
      } catch (err) {
        for (const a of g.asks) a.reject(err);
      }
    }
  }

  return {
    requests,
    shareGroupLag: async (groupId, topics) => (await ask("share", groupId, topics)).lag,
    async shareGroupHeads(groupId, topics) {
      const read = await ask("share", groupId, topics, true);
      const oldest = new Map<string, number>();
      for (const [key, ts] of read.heads) {
        const topic = topicOfKey(key);
        if (topics.includes(topic)) oldest.set(topic, Math.min(ts, oldest.get(topic) ?? Number.POSITIVE_INFINITY));
      }
      return new Map(
        topics.map((t) => {
          const waiting = read.lag.get(t) ?? 0;
          const ts = oldest.get(t);
          return [t, waiting > 0 && ts !== undefined ? { waiting, oldestMs: ts } : { waiting }];
        }),
      );
    },
    consumerGroupLag: async (groupId, topics) => (await ask("consumer", groupId, topics)).lag,
    async close() {
      closed = true;
      await cluster.close();
    },
  };
}
