import {
  Partitioners,
  type ICustomPartitioner,
  type Kafka,
  type Message,
  type Producer,
  type RecordMetadata,
  type RetryOptions,
  type TopicMessages,
} from "kafkajs";
import type { Logger } from "./logger.ts";
import { type RecordSigner, SIGNATURE_HEADER } from "./record-signer.ts";
import { signedKindOf } from "./topics.ts";

interface Queued {
  readonly topic: string;
  /** The record as given to `send` (what `withdraw` is asked about). */
  readonly original: Message;
  /** What goes to kafkajs: a copy of the record, whose partition the partitioner pins (see pinningPartitioner). */
  readonly message: Message;
  readonly resolve: (at: RecordPosition | undefined) => void;
  readonly reject: (err: unknown) => void;
}

/** Where the broker says it wrote a record: its partition and offset. */
export interface RecordPosition {
  readonly partition: number;
  readonly offset: string;
}

/** An idempotent, acks=all producer that groups records sent close together. */
export interface BatchingProducer {
  connect(): Promise<void>;
  /**
   * Resolves once the broker has the record on all in-sync replicas, with its position: the
   * partition (named by the record, or chosen by the partitioner) and the offset the broker
   * answered, for logs that follow a record (undefined if the broker answered no offset).
   */
  send(topic: string, message: Message): Promise<RecordPosition | undefined>;
  /**
   * Takes back a record given to `send` that still waits behind the request in flight (not yet
   * handed to kafkajs): it is never written, and its `send` rejects with RecordWithdrawnError.
   * @returns whether it was withdrawn (false: already on its way, or unknown)
   */
  withdraw(message: Message): boolean;
  /** Waits for queued records, then disconnects. Idempotent. */
  disconnect(): Promise<void>;
}

/** Thrown by `send` when the producer is not connected (not started, or stopping). */
export class ProducerClosedError extends Error {
  override readonly name = "ProducerClosedError";
}

/**
 * Rejects `send` for the records of a request the broker did not acknowledge within `stuckAfterMs`
 * (a silent partition leader): they may or may not have been written, and a new producer takes over.
 */
export class ProduceStuckError extends Error {
  override readonly name = "ProduceStuckError";
}

/**
 * Rejects `send` for records whose partitions the broker's answer still left out after
 * MAX_COMPLETION_SENDS requests: never acknowledged, perhaps never sent (see sendComplete).
 */
class ProduceIncompleteError extends Error {
  override readonly name = "ProduceIncompleteError";
  constructor(
    message: string,
    /** The records left out (the others of the request were acknowledged). */
    readonly records: readonly Queued[],
  ) {
    super(message);
  }
}

/**
 * Rejects `send` for records whose producer could not connect (every broker refused or out of
 * reach): they never went out. The connect's own error is the cause.
 */
export class ProducerNotConnectedError extends Error {
  override readonly name = "ProducerNotConnectedError";
}

/** Rejects `send` for a record taken back with `withdraw` before it went out. */
export class RecordWithdrawnError extends Error {
  override readonly name = "RecordWithdrawnError";
}

/**
 * Whether `err` (or what it wraps) is the broker refusing the producer's sequence numbers. After
 * a partition leader moves (a broker failed), kafkajs's idempotent producer can lose step with
 * the new leader and never regain it: every later request to that partition fails the same way.
 */
export function isSequenceDesync(err: unknown): boolean {
  for (let e = err as { type?: unknown; message?: unknown; originalError?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.type === "OUT_OF_ORDER_SEQUENCE_NUMBER" || /out of order sequence number/i.test(String(e.message ?? ""))) return true;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return false;
}

/**
 * Whether `err` (or what it wraps) is a request the broker never answered within kafkajs's
 * `requestTimeout`. kafkajs's producer refreshes its metadata after connection and retriable
 * protocol errors, but not after a timeout: when a partition leader goes silent (a network
 * partition, not a crash), every later request still goes to it, and fails, until the metadata
 * expires (`metadataMaxAge`, 5 min) or the old leader answers again — long after the cluster has
 * moved leadership to the live brokers.
 */
export function isRequestTimeout(err: unknown): boolean {
  for (let e = err as { name?: unknown; originalError?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.name === "KafkaJSRequestTimeoutError") return true;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return false;
}

/**
 * kafkajs's DefaultPartitioner (a named partition, else the key's murmur2 hash, else round robin
 * over the partitions with a leader) that writes its choice into the record. kafkajs partitions a
 * request's records again on each of its retries, so a record without key or partition can land
 * in another partition on a retry than on the try before; pinned, it keeps its partition across
 * retries, and `sendComplete` knows which partitions an answer must hold.
 */
export const pinningPartitioner: ICustomPartitioner = () => {
  const choose = Partitioners.DefaultPartitioner();
  return (args) => {
    const partition = choose(args);
    args.message.partition = partition;
    return partition;
  };
};

/** `records` by topic, in their order. */
function groupByTopic(records: readonly Queued[]): Map<string, Queued[]> {
  const byTopic = new Map<string, Queued[]>();
  for (const q of records) {
    const list = byTopic.get(q.topic);
    if (list) list.push(q);
    else byTopic.set(q.topic, [q]);
  }
  return byTopic;
}

/** Requests per batch of records while the broker's answer leaves partitions out (see sendComplete). */
const MAX_COMPLETION_SENDS = 3;

/** Upper bound on records per produce request, to keep one request's size sane. */
const MAX_RECORDS_PER_REQUEST = 1_000;

/**
 * Upper bound on the record bytes of one produce request, unless a single record is larger (it
 * then goes alone). Two 7.8 MiB job records in one request went over the broker's limit and failed
 * every small record beside them; and a small record waits behind one large request, not several.
 */
export const MAX_REQUEST_RECORD_BYTES = 1024 * 1024;

const sizeOf = (v: Message["value"] | Message["key"]): number => (v === null || v === undefined ? 0 : typeof v === "string" ? v.length : v.length);

/** Records a request went past (they did not fit): each goes in the next request, so none starves. */
const passedOver = new WeakSet<object>();

/**
 * The records of the next request, taken out of `queue`: in order, those that fit
 * MAX_REQUEST_RECORD_BYTES (small records go past larger ones waiting: issue #52); a record larger
 * than that alone, once no smaller one waits. A record passed over once goes first in the next
 * request (alone if it must), so a steady stream of small records cannot hold a large one back.
 */
export function takeRequest<Q extends { readonly message: Message }>(queue: Q[]): Q[] {
  const taken = new Set<Q>();
  let bytes = 0;
  const overdue = queue.find((q) => passedOver.has(q));
  if (overdue !== undefined) {
    taken.add(overdue);
    bytes += sizeOf(overdue.message.value) + sizeOf(overdue.message.key);
  }
  for (const q of queue) {
    if (taken.has(q)) continue;
    if (taken.size >= MAX_RECORDS_PER_REQUEST) break;
    const size = sizeOf(q.message.value) + sizeOf(q.message.key);
    if (bytes + size > MAX_REQUEST_RECORD_BYTES) continue;
    taken.add(q);
    bytes += size;
  }
  if (taken.size === 0 && queue[0] !== undefined) taken.add(queue[0]);
  let kept = 0;
  for (const q of queue) {
    if (taken.has(q)) continue;
    passedOver.add(q);
    queue[kept++] = q;
  }
  queue.length = kept;
  return [...taken];
}

/**
 * kafkajs has no linger, and idempotence allows one request in flight, so records that arrive
 * while a request is in flight go together in the next one. A lone record goes out at once:
 * no added wait at light load, large requests under heavy load.
 */
export function createBatchingProducer(
  kafka: Kafka,
  logger: Logger,
  opts: {
    retry?: RetryOptions;
    name: string;
    /** Signs job, result and cancel records (by their topic) when it has keys. */
    signer?: RecordSigner;
    /**
     * A request not acknowledged within this time is taken for a silent partition leader (a host
     * cut off, not crashed): its records fail with ProduceStuckError at once and a new producer,
     * with fresh metadata, takes the records queued behind it — instead of waiting out kafkajs's
     * request timeout once per retry, all to the same silent leader. Unset: wait for kafkajs.
     */
    stuckAfterMs?: number;
  },
): BatchingProducer {
  const log = logger.child({ component: opts.name });
  const newProducer = (): Producer =>
    kafka.producer({
      // A record for a topic that does not exist fails; it never creates one (the services create theirs).
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: pinningPartitioner,
      ...(opts.retry ? { retry: opts.retry } : {}),
    });
  let producer = newProducer();
  let resets = 0;
  // Whether `producer` is known to be connected, and its connect while that is not known: a
  // replacement that could not connect (its host cut off from the brokers) must connect before
  // it sends — kafkajs refuses to send on a producer that never connected.
  let up = false;
  let connecting: Promise<void> | undefined;

  function ensureConnected(): Promise<void> {
    if (up) return Promise.resolve();
    if (!connecting) {
      const p = producer;
      connecting = p.connect().then(
        () => {
          if (producer !== p) return;
          up = true;
          connecting = undefined;
        },
        (err: unknown) => {
          if (producer === p) connecting = undefined;
          throw err;
        },
      );
    }
    return connecting;
  }

  /**
   * Swaps in a new producer (a new producer id, sequences from 0, fresh metadata) for one that lost
   * step with a leader or keeps writing to a leader that does not answer.
   */
  async function reset(err: unknown, why: string): Promise<void> {
    resets += 1;
    log.warn({ err, resets }, `${why}; starting a new producer`);
    const old = producer;
    producer = newProducer();
    up = false;
    connecting = undefined;
    // Not awaited: the old producer may still wait on a silent broker.
    void old.disconnect().catch(() => undefined);
    // On failure the next send connects again first (and fails its records while it cannot).
    await ensureConnected().catch((connectErr: unknown) => log.warn({ err: connectErr }, "new producer could not connect yet"));
  }
  const queue: Queued[] = [];
  /** Records resolved by an answer: never sent again by a fallback of the same request. */
  const acknowledged = new WeakSet<Queued>();

  function signed(topic: string, message: Message): Message {
    const kind = opts.signer?.enabled ? signedKindOf(topic) : undefined;
    if (kind === undefined || message.value === null || message.value === undefined) return message;
    const value = typeof message.value === "string" ? Buffer.from(message.value) : message.value;
    return { ...message, value, headers: { ...message.headers, [SIGNATURE_HEADER]: opts.signer!.sign(kind, value)! } };
  }
  let sending: Promise<void> | undefined;
  let connected = false;

  async function sendQueued(): Promise<void> {
    const batch = takeRequest(queue);
    try {
      await sendComplete(batch);
    } catch (err) {
      // Only the records left out: the others were acknowledged, and sending them again would write them twice.
      if (err instanceof ProduceIncompleteError) return refuse(err.records, err, "the broker's answers kept leaving partitions out");
      if (err instanceof ProduceStuckError) return refuse(batch, err, "a produce request is stuck (partition leader silent?)");
      if (isSequenceDesync(err)) return refuse(batch, err, "producer sequence out of step with the partition leader");
      if (isRequestTimeout(err)) return refuse(batch, err, "a produce request timed out (partition leader unreachable?)");
      const byTopic = groupByTopic(batch);
      if (byTopic.size === 1) {
        log.warn({ err, records: batch.length }, "produce failed");
        return refuse(batch, err, "a produce request failed");
      }
      // kafkajs fails a whole request for one bad destination (an invalid or deleted topic, e.g.
      // the reply topic of a corrupted job record): retry each topic alone, so that only the
      // records of the bad one fail and the others are not held hostage by it. The same records
      // go out again with the same sequence numbers: one written already is acknowledged, not doubled.
      const refused: Queued[] = [];
      let cause: unknown;
      for (const [topic, all] of byTopic) {
        // Not those a first answer already held (sendComplete resolves them as it goes).
        const records = all.filter((q) => !acknowledged.has(q));
        if (records.length === 0) continue;
        try {
          await sendComplete(records);
        } catch (topicErr) {
          log.warn({ err: topicErr, topic, records: records.length }, "produce failed");
          refused.push(...(topicErr instanceof ProduceIncompleteError ? topicErr.records : records));
          cause = topicErr;
        }
      }
      if (refused.length > 0) await refuse(refused, cause, "a produce request failed");
    }
  }

  /**
   * Fails records whose request failed, and retires the producer that sent them. A failed request
   * may still have been written (a leader that appended and replicated it, then died before it
   * answered), yet kafkajs hands its sequence numbers to the next records of the same partitions:
   * the new leader would take those for a retry of the written batch, acknowledge them with its
   * offset and drop them (accepted work lost). A new producer id starts a sequence of its own.
   */
  async function refuse(records: readonly Queued[], err: unknown, why: string): Promise<void> {
    for (const q of records) q.reject(err);
    if (connected) await reset(err, why);
  }

  /**
   * Sends `records` and resolves each with its position, until
   * every record's partition is in the broker's answer. kafkajs can answer a request without some
   * of its partitions: when a partition's leader refuses it (NOT_LEADER_OR_FOLLOWER: leadership
   * moved) kafkajs refreshes its metadata and retries, but only to brokers that have not answered
   * yet; a partition whose new leader is a broker that already answered for others is never sent,
   * and sendBatch resolves without it. Those records are sent again here, alone (they never went
   * out, so their sequence numbers are still free); after MAX_COMPLETION_SENDS requests the rest
   * fail with ProduceIncompleteError.
   */
  async function sendComplete(records: readonly Queued[]): Promise<void> {
    let pending = records;
    for (let sends = 1; ; sends++) {
      const topicMessages: TopicMessages[] = [...groupByTopic(pending)].map(([topic, qs]) => ({ topic, messages: qs.map((q) => q.message) }));
      pending = resolveAll(pending, await sendOrStuck(topicMessages));
      if (pending.length === 0) return;
      const partitions = [...new Set(pending.map((q) => `${q.topic}[${String(q.message.partition)}]`))];
      if (sends === MAX_COMPLETION_SENDS) {
        throw new ProduceIncompleteError(`${pending.length} records of ${partitions.join(", ")} not acknowledged after ${sends} requests`, pending);
      }
      log.warn({ records: pending.length, partitions }, "the broker's answer left out partitions of the request (a leader moved); sending their records again");
    }
  }

  /**
   * Resolves each record of a request that the answer holds with its position (the broker answers
   * one base offset per partition, and a partition's records of one request take consecutive
   * offsets in their order), and returns the records of partitions the answer left out.
   */
  function resolveAll(records: readonly Queued[], written: readonly RecordMetadata[]): Queued[] {
    const next = new Map<string, bigint>();
    for (const m of written) if (m.errorCode === 0) next.set(`${m.topicName}\0${m.partition}`, BigInt(m.baseOffset ?? "-1"));
    const left: Queued[] = [];
    for (const q of records) {
      const key = `${q.topic}\0${q.message.partition}`;
      const offset = next.get(key);
      if (offset === undefined) left.push(q);
      else if (offset < 0n) q.resolve(undefined);
      else {
        next.set(key, offset + 1n);
        q.resolve({ partition: q.message.partition!, offset: String(offset) });
      }
      if (offset !== undefined) acknowledged.add(q);
    }
    return left;
  }

  /** sendBatch, bounded by `stuckAfterMs` when set (the request itself is left to kafkajs). */
  async function sendOrStuck(topicMessages: TopicMessages[]): Promise<RecordMetadata[]> {
    // A connect that fails rejects the records (no new producer: this one is not stuck, it is cut off).
    await ensureConnected().catch((err: unknown) => {
      throw new ProducerNotConnectedError(`not connected: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    const sent = producer.sendBatch({ topicMessages, acks: -1 });
    if (opts.stuckAfterMs === undefined) return sent;
    sent.catch(() => undefined); // if it fails after the bound, nobody waits for it
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ProduceStuckError(`not acknowledged within ${opts.stuckAfterMs} ms`)), opts.stuckAfterMs);
    });
    try {
      return await Promise.race([sent, stuck]);
    } finally {
      clearTimeout(timer);
    }
  }

  function flush(): void {
    if (sending || queue.length === 0) return;
    sending = sendQueued().finally(() => {
      sending = undefined;
      flush();
    });
  }

  return {
    async connect() {
      await ensureConnected();
      connected = true;
    },
    send(topic, message) {
      if (!connected) return Promise.reject(new ProducerClosedError(`${opts.name} is not connected`));
      return new Promise<RecordPosition | undefined>((resolve, reject) => {
        // A copy, whatever signed() returns: the partitioner writes the record's partition into it.
        queue.push({ topic, original: message, message: { ...signed(topic, message) }, resolve, reject });
        flush();
      });
    },
    withdraw(message) {
      const i = queue.findIndex((q) => q.original === message);
      if (i < 0) return false;
      const [q] = queue.splice(i, 1);
      q!.reject(new RecordWithdrawnError("withdrawn before it was sent"));
      return true;
    },
    async disconnect() {
      if (!connected) return;
      connected = false;
      while (sending) await sending;
      await producer.disconnect();
    },
  };
}
