import type { Admin, Kafka, KafkaMessage, Producer } from "kafkajs";
import { COMPACTED_STATE_CONFIG, createResilientConsumer, ensureTopics, type Logger, SOLO_GROUP_CONSUMER, type TopicSpec } from "@shoal/common";
import type { RecordReader } from "@shoal/kafka-share";
import { CHUNK_BYTES } from "./batch-config.ts";
import type { ChunkRef } from "./batch-records.ts";
import { BatchState } from "./batch-state.ts";

/** The Batch API's topics, from SHOAL_BATCH_TOPIC_PREFIX. */
export interface BatchTopics {
  /** Compacted state: files, batches, cancels, runner snapshots (one partition: one order for all). */
  readonly state: string;
  /** File bytes: chunk records keyed `<fileId>/<n>`, deleted by retention. */
  readonly files: string;
  /** Holds no records: its partitions are what the runners' consumer group shares out (batch-owners.ts). */
  readonly work: string;
  /** The runners' consumer group. */
  readonly runnersGroup: string;
}

/** Partitions of the work topic: at most this many gateways run batches at once. */
export const WORK_PARTITIONS = 12;

export function batchTopics(prefix: string): BatchTopics {
  return { state: `${prefix}.batches`, files: `${prefix}.files`, work: `${prefix}.batch-work`, runnersGroup: `${prefix}.batch-runners` };
}

/** The three topics; the files topic keeps chunks `retentionMs`. */
export function batchTopicSpecs(t: BatchTopics, retentionMs: number): TopicSpec[] {
  return [
    {
      topic: t.state,
      partitions: 1,
      // As the model registry's: compacted, a tombstone kept a day.
      config: COMPACTED_STATE_CONFIG,
    },
    { topic: t.files, partitions: 3, config: { "retention.ms": String(retentionMs), "max.message.bytes": String(CHUNK_BYTES + 64 * 1024) } },
    { topic: t.work, partitions: WORK_PARTITIONS },
  ];
}

/** The Batch API's storage on Kafka: the state every gateway follows, and file chunks. */
export interface BatchStore {
  readonly state: BatchState;
  /** Creates the topics, reads the state topic to its end, and follows it. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Writes a state record (null: a tombstone) and resolves once this gateway has applied it. */
  write(key: string, value: Buffer | null): Promise<void>;
  /** Writes one chunk of a file's bytes; resolves with where it lies. */
  writeChunk(key: string, bytes: Buffer): Promise<ChunkRef>;
  /** A file's bytes, chunk by chunk; throws if a chunk is gone (retention). */
  readChunks(chunks: readonly ChunkRef[]): AsyncGenerator<Buffer>;
  /**
   * Resolves once every state record written before the call is applied here (at most `timeoutMs`):
   * a lookup that missed asks this before answering 404, so an id just created through another
   * gateway is found.
   */
  catchUp(timeoutMs?: number): Promise<void>;
  /** Called with the batch id of every applied batch, cancel or progress record. */
  onBatchChange(listener: (batchId: string) => void): void;
}

const WRITE_TIMEOUT_MS = 10_000;

export interface BatchStoreOptions {
  readonly topics: BatchTopics;
  readonly fileRetentionMs: number;
  readonly instanceId: string;
  readonly reader: RecordReader;
  readonly catchUpMs?: number;
}

/**
 * The state topic's high watermark. Another gateway may have created the topic a moment ago, its
 * leader not yet elected (NOT_LEADER_OR_FOLLOWER): asked again until `deadline`.
 */
async function endOffset(admin: Admin, topic: string, deadline: number): Promise<bigint> {
  for (;;) {
    try {
      const [end] = await admin.fetchTopicOffsets(topic);
      return BigInt(end?.high ?? "0");
    } catch (err) {
      if (Date.now() >= deadline || !(err as { retriable?: boolean }).retriable) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Follows the state topic from its start (as the model registry follows `shoal.registry`). */
export function createBatchStore(kafka: Kafka, logger: Logger, opts: BatchStoreOptions): BatchStore {
  const log = logger.child({ component: "batch-store" });
  const { topics } = opts;
  const state = new BatchState();
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
  let applied = -1n;
  // Kept connected: asks the state topic's end for catchUp().
  const reads = kafka.admin();
  const waiters = new Set<() => void>();
  const batchListeners: Array<(id: string) => void> = [];

  function accept(message: KafkaMessage): void {
    const offset = BigInt(message.offset);
    if (offset <= applied) return;
    try {
      const changed = state.apply(message.key?.toString("utf8") ?? "", message.value, offset);
      if (changed !== undefined) for (const l of batchListeners) l(changed);
    } catch (err) {
      log.warn({ err, offset: message.offset }, "batch state record not applied");
    } finally {
      applied = offset;
      for (const w of [...waiters]) w();
    }
  }

  const consumer = createResilientConsumer(kafka, logger, {
    component: "batch-state",
    consumerConfig: {
      groupId: `shoal-batches-${opts.instanceId}`,
      ...SOLO_GROUP_CONSUMER,
      allowAutoTopicCreation: false,
      maxBytesPerPartition: 16 * 1024 * 1024,
    },
    subscribe: (c) => c.subscribe({ topic: topics.state, fromBeginning: true }),
    // Never committed: every start reads the compacted topic from its beginning.
    run: { autoCommit: false, eachMessage: async ({ message }) => accept(message) },
    deleteGroupOnStop: true,
  });

  function appliedUpTo(offset: bigint, timeoutMs: number): Promise<boolean> {
    if (applied >= offset) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = (): void => {
        if (applied >= offset) done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        waiters.delete(check);
        resolve(ok);
      };
      waiters.add(check);
    });
  }

  return {
    state,
    async start() {
      const deadline = Date.now() + (opts.catchUpMs ?? 30_000);
      const admin = kafka.admin();
      let last: bigint;
      try {
        await admin.connect();
        await ensureTopics(admin, batchTopicSpecs(topics, opts.fileRetentionMs));
        last = (await endOffset(admin, topics.state, deadline)) - 1n;
      } finally {
        await admin.disconnect().catch(() => undefined);
      }
      await producer.connect();
      await reads.connect();
      await consumer.start();
      if (!(await appliedUpTo(last, Math.max(0, deadline - Date.now())))) throw new Error(`batch state: not read to its end (offset ${last}) in time`);
      log.info({ offset: String(applied) }, "batch state read");
    },
    async stop() {
      await consumer.stop();
      await producer.disconnect().catch(() => undefined);
      await reads.disconnect().catch(() => undefined);
    },
    async catchUp(timeoutMs = 3_000) {
      const deadline = Date.now() + timeoutMs;
      await appliedUpTo((await endOffset(reads, topics.state, deadline)) - 1n, Math.max(0, deadline - Date.now()));
    },
    async write(key, value) {
      const [meta] = await producer.send({ topic: topics.state, acks: -1, messages: [{ key, value }] });
      if (!(await appliedUpTo(BigInt(meta?.baseOffset ?? "-1"), WRITE_TIMEOUT_MS)))
        throw new Error(`batch state record not read back within ${WRITE_TIMEOUT_MS} ms`);
    },
    async writeChunk(key, bytes) {
      const [meta] = await producer.send({ topic: topics.files, acks: -1, messages: [{ key, value: bytes }] });
      if (meta?.baseOffset === undefined) throw new Error("file chunk not acknowledged");
      return { partition: meta.partition, offset: meta.baseOffset, bytes: bytes.length };
    },
    async *readChunks(chunks) {
      for (const c of chunks) {
        const record = await opts.reader.read(topics.files, c.partition, BigInt(c.offset));
        if (record?.value === null || record === undefined) throw new Error(`file chunk ${topics.files}/${c.partition}@${c.offset} is gone`);
        yield record.value;
      }
    },
    onBatchChange(listener) {
      batchListeners.push(listener);
    },
  };
}
