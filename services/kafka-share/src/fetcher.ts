/**
 * ShareFetch and ShareAcknowledge on one share session, and what their answers mean: records to
 * hand out, acknowledgement outcomes to report, sessions to reset, metadata to refresh.
 */
import { AckType, partitionKey, toBatches, type PartitionAcks, type PartitionRef } from "./acks.ts";
import type { Cluster } from "./cluster.ts";
import { AcknowledgeError, ErrorCode, KafkaProtocolError } from "./errors.ts";
import { shareAcknowledgeApi, type ShareAcknowledgeResponse } from "./generated/share-acknowledge.ts";
import { shareFetchApi, type ShareFetchRequestFetchTopic, type ShareFetchResponse } from "./generated/share-fetch.ts";
import { call } from "./protocol/call.ts";
import { decodePartition, type ShareRecord } from "./records.ts";
import { FINAL_EPOCH, INITIAL_EPOCH, type ShareSession } from "./session.ts";

/** The outcome of acknowledging some offsets of one partition. */
export interface AcknowledgeResult {
  readonly topic: string;
  readonly partition: number;
  readonly offsets: readonly bigint[];
  /** Set when the broker did not take the acknowledgement (e.g. the lock had expired). */
  readonly error?: AcknowledgeError;
}

/** Where the fetcher reports what it learns; the consumer turns these into events and state. */
export interface FetcherHooks {
  acknowledged(result: AcknowledgeResult): void;
  /** A record was acquired in `session` (so acknowledge() knows where it lives). */
  acquired(record: ShareRecord, ref: PartitionRef, session: ShareSession): void;
  /** Partition leadership moved or a topic changed: refresh metadata before the next fetch. */
  metadataStale(): void;
  problem(error: Error, action: string): void;
}

const LEADERSHIP_ERRORS = new Set<number>([
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.UNKNOWN_TOPIC_ID,
  ErrorCode.LEADER_NOT_AVAILABLE,
  74, // FENCED_LEADER_EPOCH
]);

export interface FetchLimits {
  readonly maxRecords: number;
  readonly maxWaitMs: number;
  readonly maxBytes: number;
}

export class Fetcher {
  constructor(
    private readonly cluster: Cluster,
    private readonly groupId: string,
    private readonly memberId: string,
    private readonly hooks: FetcherHooks,
    /** How long accepted records' acks may wait for a later fetch (ShareConsumerOptions.ackLingerMs). */
    private readonly ackLingerMs = 0,
  ) {}

  /** Negotiates the ShareFetch/ShareAcknowledge version with the session's broker (2 if it can). */
  async version(session: ShareSession): Promise<number> {
    if (session.version > 0) return session.version;
    const versions = await this.cluster.apiVersions(session.nodeId);
    const range = versions.get(shareFetchApi.apiKey);
    if (!range || range.max < shareFetchApi.minVersion) {
      throw new KafkaProtocolError("ShareFetch", 35, `broker ${session.nodeId} does not support share groups`); // UNSUPPORTED_VERSION
    }
    session.version = Math.min(range.max, shareFetchApi.maxVersion);
    return session.version;
  }

  /** One ShareFetch: acquires records of `wanted` and carries the acks queued for them. */
  fetch(session: ShareSession, wanted: readonly PartitionRef[], limits: FetchLimits): Promise<ShareRecord[]> {
    return session.exclusive(async () => {
      const version = await this.version(session);
      const wantedKeys = new Set(wanted.map((p) => partitionKey(p.topicId, p.partition)));
      // Acks can only ride an open session; those of other partitions go by ShareAcknowledge. Once
      // any of this fetch's partitions has acks due, all of theirs ride along.
      const mine = (p: PartitionRef): boolean => wantedKeys.has(partitionKey(p.topicId, p.partition));
      const acks = session.epoch === INITIAL_EPOCH || !session.acks.due(mine, this.ackLingerMs) ? [] : session.acks.take(mine);
      const forgotten = session.forgotten(wantedKeys);
      const topics = new Map<string, ShareFetchRequestFetchTopic>();
      for (const p of wanted) {
        let t = topics.get(p.topicId);
        if (!t) {
          t = { topicId: p.topicId, partitions: [] };
          topics.set(p.topicId, t);
        }
        const a = acks.find((x) => x.topicId === p.topicId && x.partition === p.partition);
        t.partitions.push({ partitionIndex: p.partition, acknowledgementBatches: a ? toBatches(a.offsets) : [] });
      }
      let res: ShareFetchResponse;
      session.bareWait = limits.maxWaitMs > 0 && acks.length === 0;
      try {
        const conn = await this.cluster.connection(session.nodeId, "fetch");
        res = await call(conn, shareFetchApi, version, {
          groupId: this.groupId,
          memberId: this.memberId,
          shareSessionEpoch: session.epoch,
          maxWaitMs: limits.maxWaitMs,
          minBytes: 1,
          maxBytes: limits.maxBytes,
          maxRecords: limits.maxRecords,
          batchSize: limits.maxRecords,
          // Record-limit mode (KIP-1206): acquire at most MaxRecords, splitting producer batches.
          shareAcquireMode: version >= 2 ? 1 : 0,
          topics: [...topics.values()],
          forgottenTopicsData: groupRefs(forgotten).map(([topicId, partitions]) => ({ topicId, partitions })),
        });
      } catch (err) {
        this.#lost(session, err as Error, acks, "ShareFetch failed; reconnecting with a new share session");
        return [];
      } finally {
        session.bareWait = false;
      }
      if (res.errorCode !== ErrorCode.NONE) {
        this.#lost(session, new KafkaProtocolError("ShareFetch", res.errorCode, res.errorMessage), acks, "starting a new share session");
        return [];
      }
      session.advance(wanted);
      session.forget(forgotten);
      for (const n of res.nodeEndpoints) this.cluster.learnAddress(n.nodeId, n.host, n.port);
      const reported = new Set<string>();
      const out: ShareRecord[] = [];
      for (const t of res.responses) {
        for (const p of t.partitions) {
          const key = partitionKey(t.topicId, p.partitionIndex);
          const ref = wanted.find((w) => partitionKey(w.topicId, w.partition) === key);
          const sent = acks.find((a) => partitionKey(a.topicId, a.partition) === key);
          if (sent) {
            reported.add(key);
            this.#report(sent, p.acknowledgeErrorCode, p.acknowledgeErrorMessage);
          }
          if (LEADERSHIP_ERRORS.has(p.errorCode)) {
            this.hooks.metadataStale();
            continue;
          }
          if (p.errorCode !== ErrorCode.NONE) {
            this.hooks.problem(new KafkaProtocolError("ShareFetch", p.errorCode, p.errorMessage), `skipping ${key} this time`);
            continue;
          }
          if (!ref) continue;
          const { records, gaps } = decodePartition(ref.topic, p);
          for (const r of records) this.hooks.acquired(r, ref, session);
          for (const g of gaps) session.acks.add(ref, g, AckType.gap);
          out.push(...records);
        }
      }
      for (const a of acks) if (!reported.has(partitionKey(a.topicId, a.partition))) this.#report(a, ErrorCode.NONE);
      return out;
    });
  }

  /**
   * Sends the session's queued acks by ShareAcknowledge. `close` uses epoch -1, which also ends
   * the session: whatever the member still holds there is released to the group at once.
   */
  acknowledge(session: ShareSession, close: boolean, which?: (ref: PartitionRef) => boolean): Promise<void> {
    return session.exclusive(async () => {
      if (session.epoch === INITIAL_EPOCH) return; // nothing open: nothing to ack or close
      const acks = session.acks.take(which);
      if (acks.length === 0 && !close) return;
      await this.#sendAcks(session, acks, close ? FINAL_EPOCH : session.epoch, false);
      if (close) session.reset();
    });
  }

  /** Renews the locks of `acks` (ack type 4, ShareAcknowledge v2 with IsRenewAck). */
  renew(session: ShareSession, acks: PartitionAcks[]): Promise<void> {
    return session.exclusive(async () => {
      if (session.epoch === INITIAL_EPOCH) {
        for (const a of acks) this.#report(a, ErrorCode.SHARE_SESSION_NOT_FOUND, "the share session ended; the lock is gone");
        return;
      }
      if ((await this.version(session)) < 2)
        throw new KafkaProtocolError("ShareAcknowledge", 35, "renew needs share.version 2 (Kafka 4.2+ with ShareAcknowledge v2)");
      await this.#sendAcks(session, acks, session.epoch, true);
    });
  }

  async #sendAcks(session: ShareSession, acks: PartitionAcks[], epoch: number, renew: boolean): Promise<void> {
    let res: ShareAcknowledgeResponse;
    try {
      const version = await this.version(session);
      const conn = await this.cluster.connection(session.nodeId, "fetch");
      res = await call(conn, shareAcknowledgeApi, version, {
        groupId: this.groupId,
        memberId: this.memberId,
        shareSessionEpoch: epoch,
        isRenewAck: renew,
        topics: groupAcks(acks),
      });
    } catch (err) {
      this.#lost(session, err as Error, acks, "ShareAcknowledge failed; the records will be redelivered");
      return;
    }
    if (res.errorCode !== ErrorCode.NONE) {
      this.#lost(session, new KafkaProtocolError("ShareAcknowledge", res.errorCode, res.errorMessage), acks, "starting a new share session");
      return;
    }
    if (epoch !== FINAL_EPOCH) session.advance([]);
    for (const n of res.nodeEndpoints) this.cluster.learnAddress(n.nodeId, n.host, n.port);
    const codes = new Map<string, { code: number; message: string | null | undefined }>();
    for (const t of res.responses)
      for (const p of t.partitions) codes.set(partitionKey(t.topicId, p.partitionIndex), { code: p.errorCode, message: p.errorMessage });
    for (const a of acks) {
      const c = codes.get(partitionKey(a.topicId, a.partition));
      if (c && LEADERSHIP_ERRORS.has(c.code)) this.hooks.metadataStale();
      this.#report(a, c?.code ?? ErrorCode.NONE, c?.message);
    }
  }

  /** The session is gone (or unknowable): its acks failed, its locks are released or expiring. */
  #lost(session: ShareSession, error: Error, sent: PartitionAcks[], action: string): void {
    // A broker that does not answer (cut off, stopped) may have lost its leaderships meanwhile:
    // ask the cluster again before the next fetch rather than dialling the same node forever.
    if (!(error instanceof KafkaProtocolError)) {
      this.cluster.drop(session.nodeId, "fetch");
      this.hooks.metadataStale();
    }
    if (error instanceof KafkaProtocolError && error.code === ErrorCode.NOT_LEADER_OR_FOLLOWER) this.hooks.metadataStale();
    if (!session.aborted) this.hooks.problem(error, action);
    const code = error instanceof KafkaProtocolError ? error.code : ErrorCode.SHARE_SESSION_NOT_FOUND;
    for (const a of [...sent, ...session.acks.take()]) this.#report(a, code, error.message);
    session.reset();
  }

  #report(acks: PartitionAcks, code: number, message?: string | null): void {
    const offsets = [...acks.offsets.entries()].filter(([, t]) => t !== AckType.gap).map(([o]) => o);
    if (offsets.length === 0) return;
    const error = code === ErrorCode.NONE ? undefined : new AcknowledgeError(acks.topic, acks.partition, offsets, code, message);
    this.hooks.acknowledged(
      error ? { topic: acks.topic, partition: acks.partition, offsets, error } : { topic: acks.topic, partition: acks.partition, offsets },
    );
  }
}

function groupRefs(refs: readonly PartitionRef[]): Array<[string, number[]]> {
  const m = new Map<string, number[]>();
  for (const r of refs) m.set(r.topicId, [...(m.get(r.topicId) ?? []), r.partition]);
  return [...m.entries()];
}

function groupAcks(acks: readonly PartitionAcks[]) {
  const m = new Map<string, Array<{ partitionIndex: number; acknowledgementBatches: ReturnType<typeof toBatches> }>>();
  for (const a of acks) m.set(a.topicId, [...(m.get(a.topicId) ?? []), { partitionIndex: a.partition, acknowledgementBatches: toBatches(a.offsets) }]);
  return [...m.entries()].map(([topicId, partitions]) => ({ topicId, partitions }));
}
