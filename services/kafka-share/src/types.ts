/** The share consumer's public types. */
import type { AckTypeName } from "./acks.ts";
import type { AcknowledgeResult } from "./fetcher.ts";
import type { ShareGroupConfig } from "./group-config.ts";
import type { ShareRecord } from "./records.ts";
import type { KafkaSecurityError } from "./errors.ts";
import type { KafkaSecurityOptions } from "./security.ts";

/** pino-compatible: what the consumer logs (joins, assignments at info; retried problems at warn). */
export interface ShareConsumerLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  /** Where a fatal security failure is logged (warn when absent). */
  error?(obj: object, msg: string): void;
}

export interface ShareConsumerOptions {
  /** Bootstrap brokers, `host:port`. */
  readonly brokers: readonly string[];
  /** The share group. Every member of it reads the same partitions. */
  readonly groupId: string;
  readonly clientId: string;
  readonly logger?: ShareConsumerLogger;
  /**
   * Group configs to set (IncrementalAlterConfigs) before joining, e.g. `{ autoOffsetReset:
   * "earliest", recordLockDurationMs: 5000 }`. They apply to the whole group: every member should
   * pass the same values or none.
   */
  readonly groupConfig?: ShareGroupConfig;
  /** Upper bound on a ShareFetch response's bytes (default 50 MiB). */
  readonly maxBytes?: number;
  readonly connectTimeoutMs?: number;
  /** Socket-level timeout per request; keep it above the longest fetch `maxWaitMs` (default 35 s). */
  readonly requestTimeoutMs?: number;
  /** TLS (CA, client certificate) and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) on every connection. */
  readonly security?: KafkaSecurityOptions;
  /**
   * How long accepted records' acknowledgements may wait in the queue, in ms, so that several
   * go to the broker together (default 0: every ShareFetch carries all of its partitions' queued
   * acks). The broker persists share state once per partition per acknowledging request, so at
   * light load, one record per fetch, each accept costs a state write of its own; with a linger,
   * a partition's acks ride the first fetch after its oldest has waited this long. Releases and
   * rejects never wait (they take all of the partition's queued acks with them), and flush() and
   * close() send everything. Records whose acks are still queued when a member dies are delivered
   * again after their lock runs out, as any acquired record is.
   */
  readonly ackLingerMs?: number;
}

export interface FetchOptions {
  /**
   * At most this many records are acquired (locked to this member) and returned. With share.version
   * 2 brokers this holds even inside a producer batch (record-limit acquire mode); a share.version 1
   * broker acquires whole batches and may return more.
   */
  readonly maxRecords: number;
  /**
   * Bytes of log this fetch reads at most (ShareFetch MaxBytes; default the consumer's `maxBytes`),
   * split across the leaders it asks. The broker acquires only records it read, and always reads
   * the first batch whole, however large: a fetch with records waiting returns at least one. One
   * record per producer batch (a producer that sends each record alone), this bounds the records'
   * total size, e.g. to a batch's worth of work where records differ in size.
   */
  readonly maxBytes?: number;
  /** How long to wait for records (and, before the first assignment, for one). */
  readonly maxWaitMs: number;
  /** Stops waiting for an assignment; a request already at the broker still runs to its end. */
  readonly signal?: AbortSignal;
  /**
   * Fetch only from the assigned partitions of these subscribed topics (default: every assigned
   * partition). A share session names the partitions each ShareFetch reads, so a member can pull
   * from the topics it wants now, e.g. one topic per model to form one model's batch. Records
   * acquired earlier from a topic left out stay acquired, and their acknowledgements go by
   * ShareAcknowledge. An empty list, or topics with no assigned partition, fetch nothing: the call
   * returns `[]` after at most `maxWaitMs`.
   */
  readonly topics?: readonly string[];
}

/** `accept`: done. `release`: give it back now (delivered again, to anyone). `reject`: never again. */
export type AcknowledgeType = Exclude<AckTypeName, "gap" | "renew">;

export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

export interface ShareConsumerMetrics {
  readonly memberId: string;
  /** 0 before joining, -1 after leaving. */
  readonly memberEpoch: number;
  readonly assignment: readonly TopicPartition[];
  readonly heartbeats: number;
  readonly fetches: number;
  readonly recordsDelivered: number;
  readonly acksSent: number;
  readonly ackErrors: number;
  /** Retried failures (network, coordinator moves, session resets). */
  readonly problems: number;
  readonly sessions: ReadonlyArray<{ nodeId: number; epoch: number; version: number; pendingAcks: number }>;
}

/** Events, as `[arguments]` per name (node:events typing). */
export interface ShareConsumerEvents {
  joined: [{ memberId: string; memberEpoch: number }];
  assignment: [{ partitions: TopicPartition[]; memberEpoch: number }];
  memberEpoch: [number];
  /** Every acknowledgement outcome; `error` set when the broker refused it (lock expired, ...). */
  acknowledged: [AcknowledgeResult];
  /** A failure the consumer is handling by retrying, reconnecting or rejoining. */
  problem: [{ error: Error; action: string }];
  /**
   * The brokers refused this client's security (SASL authentication failed, certificate not
   * trusted): the consumer has stopped heartbeating and every fetch() rejects with this error.
   */
  fatal: [KafkaSecurityError];
  closed: [];
}

export interface ShareConsumer {
  /** This member's id (16 random bytes, base64url), fixed for the consumer's life. */
  readonly memberId: string;
  /** Joins the group (after applying `groupConfig`) subscribed to `topics`; call again to change them. */
  subscribe(topics: readonly string[]): void;
  /** Acquires up to `maxRecords` records; sends queued acks on the way. Resolves [] on timeout. */
  fetch(options: FetchOptions): Promise<ShareRecord[]>;
  /** Queues an acknowledgement; it is sent with the next fetch(), flush() or close(). */
  acknowledge(record: ShareRecord, type: AcknowledgeType): void;
  /** Extends the record's acquisition lock by the group's lock duration now (share.version 2). */
  renew(record: ShareRecord): Promise<void>;
  /** Sends queued acknowledgements now (ShareAcknowledge); outcomes arrive as `acknowledged` events. */
  flush(): Promise<void>;
  /** Sends queued acks, closes the share sessions (releasing unacknowledged records) and leaves. */
  close(): Promise<void>;
  /** Drops every connection with no acks and no leave, as a crash would (locks then expire). */
  destroy(): Promise<void>;
  metrics(): ShareConsumerMetrics;
  on<K extends keyof ShareConsumerEvents>(event: K, listener: (...args: ShareConsumerEvents[K]) => void): ShareConsumer;
  off<K extends keyof ShareConsumerEvents>(event: K, listener: (...args: ShareConsumerEvents[K]) => void): ShareConsumer;
}
