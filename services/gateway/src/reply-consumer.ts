import type { EachBatchPayload, Kafka } from "kafkajs";
import { SpanStatusCode } from "@opentelemetry/api";
import {
  Attr,
  contextFromHeaders,
  createResilientConsumer,
  decodeResult,
  RecordDecodeError,
  SIGNATURE_HEADER,
  SOLO_GROUP_CONSUMER,
  startProcessSpan,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { SettleOutcome } from "./pending-jobs.ts";

/** How often the reply consumer commits its offset (see eachBatch). */
export const REPLY_COMMIT_INTERVAL_MS = 5_000;

export interface ReplyConsumer {
  /** Resolves once the consumer has joined its group and will see every new reply. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ReplyConsumerOptions {
  readonly topic: string;
  readonly groupId: string;
  readonly onResult: (result: JobResult) => SettleOutcome;
  readonly joinTimeoutMs?: number;
  /** Called with the number of results in a fetch that found no waiting call. */
  readonly onDropped?: (count: number) => void;
  /** Checks each result's signature (SHOAL_CLUSTER_KEYS): a forged result never answers a call. */
  readonly signer?: RecordSigner;
  /** Called for each result refused for its signature. */
  readonly onForged?: () => void;
}

/** Job ids named per debug line of dropped results. */
const MAX_LOGGED_IDS = 50;

/**
 * Reads this gateway replica's reply topic and hands each result to its waiting call.
 * Undecodable records are logged and skipped; results nobody waits for (duplicates, late
 * answers to calls that already ended) are dropped.
 */
export function createReplyConsumer(kafka: Kafka, logger: Logger, opts: ReplyConsumerOptions): ReplyConsumer {
  const log = logger.child({ component: "reply-consumer" });

  async function eachBatch({ batch, heartbeat, resolveOffset, commitOffsetsIfNecessary }: EachBatchPayload): Promise<void> {
    let dropped = 0;
    const droppedIds: string[] = [];
    for (const message of batch.messages) {
      // The worker's reply carries its trace context: the receipt joins the request's trace.
      const span = startProcessSpan({ topic: batch.topic, partition: batch.partition, offset: message.offset }, {}, contextFromHeaders(message.headers));
      try {
        if (opts.signer !== undefined && !opts.signer.verify("result", message.value, message.headers?.[SIGNATURE_HEADER])) {
          opts.onForged?.();
          span.setStatus({ code: SpanStatusCode.ERROR, message: "result without a valid signature" });
          log.warn({ partition: batch.partition, offset: message.offset }, "skipping a result without a valid signature (SHOAL_CLUSTER_KEYS)");
          continue;
        }
        const result = decodeResult(message.value);
        span.setAttribute(Attr.JOB_ID, result.jobId);
        if (opts.onResult(result) === "unknown") {
          dropped += 1;
          if (droppedIds.length < MAX_LOGGED_IDS) droppedIds.push(result.jobId);
        }
      } catch (err) {
        if (!(err instanceof RecordDecodeError)) throw err;
        span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
        log.warn({ err, partition: batch.partition, offset: message.offset }, "skipping undecodable reply");
      } finally {
        span.end();
      }
    }
    if (dropped > 0) {
      opts.onDropped?.(dropped);
      log.debug({ dropped, jobIds: droppedIds, partition: batch.partition }, "results with no waiting call dropped (late or duplicate)");
    }
    // The offset only bounds what a replacement consumer reads again (results nobody waits for
    // any more, dropped): committed every REPLY_COMMIT_INTERVAL_MS, not after every fetch.
    resolveOffset(batch.lastOffset());
    await commitOffsetsIfNecessary();
    await heartbeat();
  }

  // The topic was created by this replica just before: reading it from the start loses nothing.
  // kafkajs stops for good after a long broker outage; the factory replaces the consumer then.
  const consumer = createResilientConsumer(kafka, logger, {
    component: "reply-consumer",
    consumerConfig: { groupId: opts.groupId, ...SOLO_GROUP_CONSUMER, allowAutoTopicCreation: false },
    subscribe: (c) => c.subscribe({ topic: opts.topic, fromBeginning: true }),
    // kafkajs' autoCommit commits after every fetch, i.e. once per reply at light load: an
    // OffsetCommit per request, on the broker and here. `commitOffsetsIfNecessary` in eachBatch
    // commits by autoCommitInterval instead.
    run: { autoCommit: false, autoCommitInterval: REPLY_COMMIT_INTERVAL_MS, eachBatchAutoResolve: true, eachBatch },
    startWhen: "joined",
    joinTimeoutMs: opts.joinTimeoutMs ?? 30_000,
  });

  return { start: () => consumer.start(), stop: () => consumer.stop() };
}
