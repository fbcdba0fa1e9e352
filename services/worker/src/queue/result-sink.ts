import type { Kafka } from "kafkajs";
import { createBatchingProducer, encodeResult, ProducerClosedError, type Logger, type RecordSigner } from "@shoal/common";
import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { DirectReplies } from "./direct-replies.ts";
import type { ReplyRegistry } from "./reply-registry.ts";

/** Writes job results to their reply topics. */
export interface ResultSink {
  start(): Promise<void>;
  /**
   * Resolves once the result is on the broker. Transient failures are retried with backoff until
   * then; it rejects only when the sink is stopping, in which case the job's offset is left
   * uncommitted and the job is redelivered (never lost).
   */
  send(topic: string, partition: number, result: JobResult, headers?: Record<string, string>): Promise<void>;
  stop(): Promise<void>;
}

/** How long a reply topic's existence (or absence) is believed before it is looked up again. */
const TOPIC_PRESENT_TTL_MS = 60_000;
const TOPIC_ABSENT_TTL_MS = 10_000;

/**
 * Looks reply topics up before the first result is produced to them, and remembers the answer:
 * a job record naming a reply topic that does not exist (a gateway that stopped, a forged or
 * corrupted record) is answered nowhere at once, instead of holding the result producer — and
 * every other job's result behind it — while the client retries the missing topic.
 */
function createTopicChecker(kafka: Kafka): { exists(topic: string): Promise<boolean>; stop(): Promise<void> } {
  const admin = kafka.admin({ retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 } });
  let connected: Promise<void> | undefined;
  const known = new Map<string, { exists: boolean; atMs: number }>();
  const pending = new Map<string, Promise<boolean>>();
  async function lookUp(topic: string): Promise<boolean> {
    connected ??= admin.connect();
    await connected;
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      return topics.some((t) => t.name === topic && t.partitions.length > 0);
    } catch (err) {
      if (/UNKNOWN_TOPIC|does not host this topic-partition|not exist/i.test(String((err as Error).message))) return false;
      throw err;
    }
  }
  return {
    async exists(topic) {
      const k = known.get(topic);
      if (k && Date.now() - k.atMs < (k.exists ? TOPIC_PRESENT_TTL_MS : TOPIC_ABSENT_TTL_MS)) return k.exists;
      let p = pending.get(topic);
      if (!p) {
        p = lookUp(topic).then(
          (exists) => {
            known.set(topic, { exists, atMs: Date.now() });
            if (known.size > 10_000) known.delete(known.keys().next().value!);
            return exists;
          },
          // The broker could not be asked: assume it exists and let the producer's own retries decide.
          () => true,
        );
        p.finally(() => pending.delete(topic)).catch(() => undefined);
        pending.set(topic, p);
      }
      return p;
    },
    async stop() {
      if (connected) await connected.then(() => admin.disconnect()).catch(() => undefined);
    },
  };
}

/** Why a result was answered nowhere. */
export type DroppedResultReason = "unregistered_reply_topic" | "missing_reply_topic";

export interface ResultSinkOptions {
  readonly signer?: RecordSigner;
  /** Results go only to reply topics a live gateway registered (on unless SHOAL_REPLY_REGISTRY=0). */
  readonly registry?: Pick<ReplyRegistry, "allows" | "direct">;
  /** Hands results straight to their gateway where its registration gives an address (issue #17). */
  readonly direct?: Pick<DirectReplies, "send" | "close">;
  /** A result on its way: straight to its gateway, or through the reply topic. */
  readonly onSent?: (via: "direct" | "topic") => void;
  /** A result answered nowhere (the job is still acknowledged). */
  readonly onDropped?: (reason: DroppedResultReason) => void;
}

/** How long a result's produce may wait for its acknowledgement before a new producer takes over. */
const RESULT_STUCK_AFTER_MS = 5_000;

export function createResultSink(kafka: Kafka, logger: Logger, workerId: string, opts: ResultSinkOptions = {}): ResultSink {
  const { signer } = opts;
  const log = logger.child({ component: "result-sink" });
  const topics = createTopicChecker(kafka);
  // Short client-level retries: this sink's own loop retries with backoff, and a long kafkajs retry
  // on one bad reply topic would hold up every other result behind it.
  const producer = createBatchingProducer(kafka, logger, {
    name: "result-producer",
    ...(signer ? { signer } : {}),
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
    // A reply partition's leader gone silent: this sink's loop sends again through a new producer.
    stuckAfterMs: RESULT_STUCK_AFTER_MS,
  });
  let stopping = false;
  let lastUnregisteredWarnMs = 0;

  return {
    start: () => producer.connect(),
    async send(topic, partition, result, headers) {
      result.workerId = workerId;
      if (opts.registry !== undefined && !(await opts.registry.allows(topic))) {
        opts.onDropped?.("unregistered_reply_topic");
        // At most a line per 10 s: a flood of forged jobs must not flood the log (the metric counts each).
        if (Date.now() - lastUnregisteredWarnMs >= 10_000) {
          lastUnregisteredWarnMs = Date.now();
          log.warn({ topic, jobId: result.jobId }, "reply topic not registered by a live gateway (a forged record, or its gateway stopped); result dropped");
        }
        return;
      }
      const bytes = encodeResult(result);
      const value = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      // Straight to the gateway holding the call when it can take it; the reply topic otherwise.
      const target = opts.direct === undefined ? undefined : opts.registry?.direct(topic);
      if (target !== undefined && (await opts.direct!.send(target, value, headers))) {
        opts.onSent?.("direct");
        log.debug({ jobId: result.jobId, topic, via: "direct" }, "result sent");
        return;
      }
      if (!(await topics.exists(topic))) {
        opts.onDropped?.("missing_reply_topic");
        log.warn({ topic, jobId: result.jobId }, "reply topic does not exist (its gateway stopped, or the record was forged); result dropped");
        return;
      }
      for (let attempt = 1; ; attempt++) {
        try {
          const at = await producer.send(topic, { key: result.jobId, value, partition, ...(headers ? { headers } : {}) });
          opts.onSent?.("topic");
          // The offset the broker answered: a result the gateway never reads can be looked up in the partition.
          log.debug({ jobId: result.jobId, topic, partition, offset: at?.offset, via: "topic", attempt }, "result sent");
          return;
        } catch (err) {
          if (stopping || err instanceof ProducerClosedError) throw err;
          // A reply topic is deleted when its gateway stops: nobody waits for this result.
          if (attempt >= 3 && /does not host this topic-partition|UNKNOWN_TOPIC/i.test(String((err as Error).message))) {
            opts.onDropped?.("missing_reply_topic");
            log.warn({ topic, jobId: result.jobId }, "reply topic is gone (its gateway stopped); result dropped");
            return;
          }
          const backoffMs = Math.min(5_000, 100 * 2 ** Math.min(attempt, 6));
          log.warn({ err, topic, attempt, backoffMs }, "producing a result failed; retrying");
          await new Promise((r) => setTimeout(r, backoffMs));
        }
      }
    },
    async stop() {
      stopping = true;
      opts.direct?.close();
      await producer.disconnect();
      await topics.stop();
    },
  };
}
