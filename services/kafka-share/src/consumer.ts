/**
 * The share consumer: membership (heartbeats), one share session per partition leader, and a pull
 * API. Records are acknowledged one by one; acks are queued and ride the next ShareFetch to the
 * same leader (or go by ShareAcknowledge on flush() / close()).
 */
import { EventEmitter } from "node:events";
import { AckType, partitionKey, type PartitionAcks, type PartitionRef } from "./acks.ts";
import { Cluster } from "./cluster.ts";
import { AcknowledgeError, ConsumerClosedError, ErrorCode, type KafkaSecurityError } from "./errors.ts";
import { Fetcher, type AcknowledgeResult } from "./fetcher.ts";
import { applyShareGroupConfig } from "./group-config.ts";
import { Membership } from "./membership.ts";
import type { ShareRecord } from "./records.ts";
import { ShareSession } from "./session.ts";
import type { FetchOptions, ShareConsumer, ShareConsumerEvents, ShareConsumerMetrics, ShareConsumerOptions } from "./types.ts";

interface Acquired {
  readonly ref: PartitionRef;
  readonly session: ShareSession;
  readonly generation: number;
}

/** The partitions of `byLeader` that belong to `topics`, leaders with none left out. */
function onlyTopics(byLeader: ReadonlyMap<number, PartitionRef[]>, topics: ReadonlySet<string>): Map<number, PartitionRef[]> {
  const out = new Map<number, PartitionRef[]>();
  for (const [leader, refs] of byLeader) {
    const kept = refs.filter((r) => topics.has(r.topic));
    if (kept.length > 0) out.set(leader, kept);
  }
  return out;
}

/**
 * Creates a share-group consumer. Nothing connects until `subscribe()`.
 *
 * @example
 * const consumer = createShareConsumer({ brokers: ["127.0.0.1:9092"], groupId: "jobs", clientId: "w1" });
 * consumer.subscribe(["jobs"]);
 * for (;;) {
 *   for (const r of await consumer.fetch({ maxRecords: 8, maxWaitMs: 1000 })) {
 *     await work(r);
 *     consumer.acknowledge(r, "accept");
 *   }
 * }
 */
export function createShareConsumer(options: ShareConsumerOptions): ShareConsumer {
  const ackLingerMs = options.ackLingerMs ?? 0;
  if (!Number.isInteger(ackLingerMs) || ackLingerMs < 0) throw new RangeError(`ackLingerMs must be an integer >= 0, got ${ackLingerMs}`);
  const events = new EventEmitter<ShareConsumerEvents>();
  const log = options.logger;
  const cluster = new Cluster({
    brokers: options.brokers,
    clientId: options.clientId,
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    // A ShareFetch may wait maxWaitMs at the broker: the socket timeout must be longer.
    requestTimeoutMs: options.requestTimeoutMs ?? 35_000,
    ...(options.security ? { security: options.security } : {}),
  });
  // A refused password or certificate: stop, once, and make every later fetch() reject with it.
  let fatal: KafkaSecurityError | undefined;
  const fail = (error: KafkaSecurityError): void => {
    if (fatal) return;
    fatal = error;
    (log?.error ?? log?.warn)?.call(log, { err: error }, "kafka-share: the brokers refused this client's security settings; stopping");
    void membership.stop(false);
    events.emit("fatal", error);
  };
  const problem = (error: Error, action: string): void => {
    const refused = cluster.securityFailure(error);
    if (refused) return fail(refused);
    metrics.problems++;
    log?.warn({ err: error, action }, "kafka-share: retrying");
    events.emit("problem", { error, action });
  };
  const membership = new Membership(cluster, options.groupId, {
    joined: (memberId, memberEpoch) => {
      log?.info({ memberId, memberEpoch, groupId: options.groupId }, "kafka-share: joined the share group");
      events.emit("joined", { memberId, memberEpoch });
    },
    assignment: (assignment, memberEpoch) => {
      metadataStale = true;
      // The broker names topics by id: learn the names (and leaders) before telling anyone.
      const unknown = [...assignment.keys()].some((id) => !cluster.topicById(id));
      const named = unknown ? cluster.refreshMetadata(topics).catch((err: unknown) => problem(err as Error, "metadata refresh failed")) : Promise.resolve();
      void named.then(() => {
        const partitions = [...assignment].flatMap(([id, ps]) => ps.map((partition) => ({ topic: cluster.topicById(id)?.name ?? id, partition })));
        log?.info({ partitions, memberEpoch }, "kafka-share: assignment");
        events.emit("assignment", { partitions, memberEpoch });
      });
    },
    epoch: (memberEpoch) => events.emit("memberEpoch", memberEpoch),
    problem,
    fatal: fail,
  });
  const sessions = new Map<number, ShareSession>();
  const acquired = new WeakMap<ShareRecord, Acquired>();
  const metrics = { fetches: 0, recordsDelivered: 0, acksSent: 0, ackErrors: 0, problems: 0 };
  let metadataStale = true;
  let topics: readonly string[] = [];
  let started: Promise<void> | undefined;
  let closed = false;

  const fetcher = new Fetcher(
    cluster,
    options.groupId,
    membership.memberId,
    {
      acknowledged: (result: AcknowledgeResult) => {
        metrics.acksSent += result.offsets.length;
        if (result.error) metrics.ackErrors += result.offsets.length;
        events.emit("acknowledged", result);
      },
      acquired: (record, ref, session) => acquired.set(record, { ref, session, generation: session.generation }),
      metadataStale: () => (metadataStale = true),
      problem,
    },
    ackLingerMs,
  );

  const sessionFor = (nodeId: number): ShareSession => {
    let s = sessions.get(nodeId);
    if (!s) {
      s = new ShareSession(nodeId);
      sessions.set(nodeId, s);
    }
    return s;
  };

  /** Assigned partitions grouped by their leader, refreshing metadata when it may be stale. */
  const partitionsByLeader = async (): Promise<Map<number, PartitionRef[]>> => {
    const assignment = membership.assignment;
    const unknown = [...assignment.keys()].some((id) => !cluster.topicById(id));
    if (metadataStale || unknown) {
      await cluster.refreshMetadata(topics);
      metadataStale = false;
    }
    const out = new Map<number, PartitionRef[]>();
    for (const [topicId, partitions] of assignment) {
      const info = cluster.topicById(topicId);
      if (!info) continue;
      for (const partition of partitions) {
        const leader = info.leaders.get(partition) ?? -1;
        if (leader < 0) {
          metadataStale = true;
          continue;
        }
        out.set(leader, [...(out.get(leader) ?? []), { topicId, topic: info.name, partition }]);
      }
    }
    return out;
  };

  const waitForAssignment = (maxWaitMs: number, signal?: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        events.off("assignment", onAssignment);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const onAssignment = (): void => {
        if (membership.assignment.size > 0) done();
      };
      const timer = setTimeout(done, maxWaitMs);
      events.on("assignment", onAssignment);
      signal?.addEventListener("abort", done, { once: true });
    });

  const ackFailedNow = (record: ShareRecord, message: string): void => {
    const error = new AcknowledgeError(record.topic, record.partition, [record.offset], ErrorCode.SHARE_SESSION_NOT_FOUND, message);
    metrics.ackErrors++;
    queueMicrotask(() => events.emit("acknowledged", { topic: record.topic, partition: record.partition, offsets: [record.offset], error }));
  };

  const flushAll = async (close: boolean): Promise<void> => {
    await Promise.all([...sessions.values()].map((s) => fetcher.acknowledge(s, close)));
  };

  const consumer: ShareConsumer = {
    memberId: membership.memberId,
    subscribe(list) {
      if (closed) throw new ConsumerClosedError();
      topics = [...new Set(list)];
      metadataStale = true;
      // Group configs first, so share.auto.offset.reset applies before the group's first fetch.
      started ??= options.groupConfig ? applyShareGroupConfig(cluster, options.groupId, options.groupConfig) : Promise.resolve();
      started.then(
        () => !closed && membership.subscribe(topics),
        (err: unknown) => {
          const refused = cluster.securityFailure(err);
          if (refused) return fail(refused);
          problem(err as Error, "could not set the group config; joining anyway");
          if (!closed) membership.subscribe(topics);
        },
      );
    },

    async fetch({ maxRecords, maxWaitMs, maxBytes, signal, topics: only }: FetchOptions) {
      if (closed) throw new ConsumerClosedError();
      if (fatal) throw fatal;
      if (!Number.isInteger(maxRecords) || maxRecords < 1) throw new RangeError(`maxRecords must be a positive integer, got ${maxRecords}`);
      if (maxBytes !== undefined && !(Number.isInteger(maxBytes) && maxBytes >= 1))
        throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
      const unknown = only?.find((t) => !topics.includes(t));
      if (unknown !== undefined) throw new RangeError(`fetch: topic '${unknown}' is not subscribed (subscribed: ${topics.join(", ")})`);
      const deadline = Date.now() + maxWaitMs;
      if (membership.assignment.size === 0) await waitForAssignment(maxWaitMs, signal);
      if (fatal) throw fatal;
      if (closed || signal?.aborted || membership.assignment.size === 0) return [];
      metrics.fetches++;
      let byLeader: Map<number, PartitionRef[]>;
      try {
        byLeader = await partitionsByLeader();
      } catch (err) {
        const refused = cluster.securityFailure(err);
        if (refused) {
          fail(refused);
          throw refused;
        }
        // No broker answers Metadata (an outage): report, pause briefly, let the caller loop on.
        problem(err as Error, "metadata refresh failed; fetching nothing this time");
        await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, deadline - Date.now()))));
        return [];
      }
      if (only) byLeader = onlyTopics(byLeader, new Set(only));
      if (byLeader.size === 0) {
        // Nothing of the named topics is assigned here (yet): wait as a fetch would, bounded.
        await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())));
        return [];
      }
      const leaders = [...byLeader.keys()];
      // maxRecords is a promise to the caller: split it across leaders (those beyond it wait a turn).
      const share = Math.max(1, Math.floor(maxRecords / Math.max(1, leaders.length)));
      const rotate = metrics.fetches % Math.max(1, leaders.length);
      const chosen = [...leaders.slice(rotate), ...leaders.slice(0, rotate)].slice(0, maxRecords);
      const waitMs = Math.max(0, deadline - Date.now());
      const bytes = Math.max(1, Math.floor((maxBytes ?? options.maxBytes ?? 50 * 1024 * 1024) / (maxBytes === undefined ? 1 : chosen.length)));
      const idle = [...sessions.values()].filter((s) => !chosen.includes(s.nodeId) && s.acks.due(() => true, ackLingerMs));
      const [batches] = await Promise.all([
        Promise.all(chosen.map((n) => fetcher.fetch(sessionFor(n), byLeader.get(n)!, { maxRecords: share, maxWaitMs: waitMs, maxBytes: bytes }))),
        Promise.all(idle.map((s) => fetcher.acknowledge(s, false))),
      ]);
      // Acks of partitions this fetch left out of its session stay queued: send them now (once due,
      // see ackLingerMs). Those of its own partitions queued while it waited ride the next fetch
      // (or flush()).
      for (const n of chosen) {
        const wanted = new Set(byLeader.get(n)!.map((p) => partitionKey(p.topicId, p.partition)));
        const others = (p: PartitionRef): boolean => !wanted.has(partitionKey(p.topicId, p.partition));
        const s = sessionFor(n);
        if (s.acks.due(others, ackLingerMs)) void fetcher.acknowledge(s, false, others);
      }
      const records = batches.flat();
      metrics.recordsDelivered += records.length;
      return records;
    },

    acknowledge(record, type) {
      const where = acquired.get(record);
      if (!where) throw new RangeError(`acknowledge: ${record.topic}-${record.partition}@${record.offset} was not delivered by this consumer`);
      if (where.session.generation !== where.generation) return ackFailedNow(record, "the share session ended; the record was released");
      where.session.acks.add(where.ref, record.offset, AckType[type]);
    },

    async renew(record) {
      const where = acquired.get(record);
      if (!where) throw new RangeError(`renew: ${record.topic}-${record.partition}@${record.offset} was not delivered by this consumer`);
      const acks: PartitionAcks[] = [{ ...where.ref, offsets: new Map([[record.offset, AckType.renew]]) }];
      let failure: AcknowledgeError | undefined;
      const onResult = (r: AcknowledgeResult): void => {
        if (r.error && r.partition === record.partition && r.topic === record.topic && r.offsets.includes(record.offset)) failure = r.error;
      };
      events.on("acknowledged", onResult);
      try {
        if (where.session.generation !== where.generation)
          throw new AcknowledgeError(record.topic, record.partition, [record.offset], ErrorCode.SHARE_SESSION_NOT_FOUND, "the share session ended");
        await fetcher.renew(where.session, acks);
      } finally {
        events.off("acknowledged", onResult);
      }
      if (failure) throw failure;
    },

    flush: () => flushAll(false),

    async close() {
      if (closed) return;
      closed = true;
      await started?.catch(() => {});
      // A fetch waiting at the broker with no acknowledgements on it would hold the close up for
      // its whole wait: cut it short (the broker ends the session and releases what it held).
      for (const s of sessions.values())
        if (s.bareWait && s.acks.size === 0) {
          s.aborted = true;
          cluster.abort(s.nodeId, "fetch");
        }
      // Final acks and session close first (epoch -1 releases what is still held), then leave.
      await flushAll(true).catch((err: unknown) => problem(err as Error, "closing share sessions"));
      await membership.stop(true);
      await cluster.close();
      log?.info({ memberId: membership.memberId }, "kafka-share: left the share group");
      events.emit("closed");
    },

    async destroy() {
      closed = true;
      await membership.stop(false);
      await cluster.close(true);
    },

    metrics(): ShareConsumerMetrics {
      return {
        memberId: membership.memberId,
        memberEpoch: membership.memberEpoch,
        assignment: [...membership.assignment].flatMap(([id, ps]) => ps.map((partition) => ({ topic: cluster.topicById(id)?.name ?? id, partition }))),
        heartbeats: membership.heartbeats,
        sessions: [...sessions.values()].map((s) => ({ nodeId: s.nodeId, epoch: s.epoch, version: s.version, pendingAcks: s.acks.size })),
        ...metrics,
      };
    },

    on(event, listener) {
      events.on(event, listener as never);
      return consumer;
    },
    off(event, listener) {
      events.off(event, listener as never);
      return consumer;
    },
  };
  return consumer;
}
