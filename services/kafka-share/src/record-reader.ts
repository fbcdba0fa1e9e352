/**
 * Reads single records by position (topic, partition, offset) with a plain Fetch: no consumer
 * group, no fetch session, no commit. kafkajs has no `assign()`, so a record whose offset a
 * service stored (a chunk of an uploaded file, issue #50) can otherwise only be read back through
 * a group join and a seek. Connections and topic metadata are kept between reads; an error that
 * says the metadata moved asks for it again once.
 *
 * Needs Fetch v17 (topic ids): Kafka 3.9+.
 */
import { fetchV17, type RecordsBatch } from "@platformatic/kafka";
import type { AdminOptions } from "./admin.ts";
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { decoded } from "./lag-requests.ts";

/** One record as read back. */
export interface StoredRecord {
  readonly offset: bigint;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

export interface RecordReaderOptions extends AdminOptions {
  /** Largest record expected (bytes): the Fetch asks for at least this much (default 4 MiB). */
  readonly maxRecordBytes?: number;
}

/** Reads records back by offset. */
export interface RecordReader {
  /**
   * The record at `offset`, or undefined when the log no longer holds it (retention deleted it,
   * compaction removed it). Rejects when the broker cannot answer (unknown topic, no leader).
   */
  read(topic: string, partition: number, offset: bigint): Promise<StoredRecord | undefined>;
  close(): Promise<void>;
}

const CONTROL_BATCH = 0x20;
const OFFSET_OUT_OF_RANGE = 1;
/** Errors after which topic metadata is asked again before one more try. */
const METADATA_MOVED = new Set<number>([
  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  ErrorCode.LEADER_NOT_AVAILABLE,
  ErrorCode.NOT_LEADER_OR_FOLLOWER,
  ErrorCode.UNKNOWN_TOPIC_ID,
]);

/** The record at `offset` in the fetched batches (skipping control batches). */
function recordAt(batches: readonly RecordsBatch[], offset: bigint): StoredRecord | undefined {
  for (const b of batches) {
    if ((b.attributes & CONTROL_BATCH) !== 0) continue;
    for (const r of b.records) {
      const at = b.firstOffset + BigInt(r.offsetDelta);
      if (at === offset) return { offset: at, key: r.key, value: r.value };
      if (at > offset) return undefined;
    }
  }
  return undefined;
}

/** @example const reader = createRecordReader({ brokers: ["127.0.0.1:9092"] }); await reader.read("shoal.files", 0, 42n); */
export function createRecordReader(opts: RecordReaderOptions): RecordReader {
  const maxBytes = opts.maxRecordBytes ?? 4 * 1024 * 1024;
  const cluster = new Cluster({
    brokers: opts.brokers,
    clientId: opts.clientId ?? "kafka-share-records",
    connectTimeoutMs: 5_000,
    requestTimeoutMs: 30_000,
    ...(opts.security ? { security: opts.security } : {}),
  });
  let closed = false;

  async function attempt(topic: string, partition: number, offset: bigint): Promise<StoredRecord | undefined | "moved"> {
    if (cluster.topicByName(topic) === undefined) await cluster.refreshMetadata([topic]);
    const info = cluster.topicByName(topic);
    const leader = info?.leaders.get(partition) ?? -1;
    if (info === undefined || leader < 0) return "moved";
    let res: fetchV17.FetchResponse;
    try {
      const conn = await cluster.connection(leader, "fetch");
      const topics = [
        { topicId: info.id, partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset: offset, lastFetchedEpoch: -1, partitionMaxBytes: maxBytes }] },
      ];
      // No wait, no minimum, no session (epoch -1), read uncommitted.
      res = await decoded(fetchV17.api.async(conn, 0, 0, maxBytes, 0, 0, -1, topics, [], ""));
    } catch (err) {
      cluster.drop(leader, "fetch");
      throw err;
    }
    const p = res.responses[0]?.partitions[0];
    if (p === undefined) throw new KafkaProtocolError("Fetch", -1, "empty response");
    if (p.errorCode === OFFSET_OUT_OF_RANGE) return undefined;
    if (METADATA_MOVED.has(p.errorCode)) return "moved";
    if (p.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError("Fetch", p.errorCode, "");
    return recordAt(p.records ?? [], offset);
  }

  return {
    async read(topic, partition, offset) {
      if (closed) throw new Error("the record reader is closed");
      let got = await attempt(topic, partition, offset).catch(async () => {
        // A lost connection: once more on a fresh one, with fresh metadata.
        await cluster.refreshMetadata([topic]);
        return attempt(topic, partition, offset);
      });
      if (got === "moved") {
        await cluster.refreshMetadata([topic]);
        got = await attempt(topic, partition, offset);
      }
      if (got === "moved") throw new KafkaProtocolError("Fetch", ErrorCode.LEADER_NOT_AVAILABLE, `${topic}/${partition}: no leader`);
      return got;
    },
    async close() {
      closed = true;
      await cluster.close();
    },
  };
}
