import type { IHeaders, Kafka } from "kafkajs";
import { create } from "@bufbuild/protobuf";
import { createBatchingProducer, deadLetterTopic, encodeEnvelope, retryTopic, WAKE_HEADER, type Logger, type RecordSigner } from "@shoal/common";
import { JobEnvelopeSchema, type JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";

/** Headers of a dead letter: why it is there, and where it came from. */
export const DeadLetterHeader = {
  REASON: "shoal-dead-reason",
  ATTEMPTS: "shoal-attempts",
  WORKER: "shoal-worker",
  MODEL: "shoal-model",
  SOURCE: "shoal-source",
} as const;

/** Sends failed jobs round again through the pool's retry topic, or to its dead-letter topic. */
export interface RetryRouter {
  start(): Promise<void>;
  /** Whether a job that failed on `attempt` gets another one. */
  retriable(attempt: number): boolean;
  /** Writes the job again with attempt + 1; resolves once the broker has it. */
  retry(envelope: JobEnvelope, reason: string): Promise<void>;
  /** Writes a job (or a record that is not one) to the dead-letter topic with its reason. */
  deadLetter(value: Buffer | null, reason: string, meta: { attempts: number; model?: string; source: string; key?: string }): Promise<void>;
  /** Writes a wake-up marker (WAKE_HEADER, no job) to a jobs topic's partition: see the share intake's give-backs. */
  wake(topic: string, partition: number): Promise<void>;
  stop(): Promise<void>;
}

export function createRetryRouter(
  kafka: Kafka,
  logger: Logger,
  opts: { pool: string; workerId: string; maxAttempts: number; signer?: RecordSigner },
): RetryRouter {
  const producer = createBatchingProducer(kafka, logger, {
    name: "retry-producer",
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 },
    ...(opts.signer ? { signer: opts.signer } : {}),
  });
  const retries = retryTopic(opts.pool);
  const dead = deadLetterTopic(opts.pool);
  return {
    start: () => producer.connect(),
    retriable: (attempt) => attempt < opts.maxAttempts,
    async retry(envelope, reason) {
      const next = create(JobEnvelopeSchema, { ...envelope, attempt: Math.max(1, envelope.attempt) + 1 });
      const value = encodeEnvelope(next);
      await producer.send(retries, {
        key: envelope.jobId,
        value: Buffer.from(value.buffer, value.byteOffset, value.byteLength),
        headers: { "shoal-retry-reason": reason.slice(0, 1_000) },
      });
    },
    async deadLetter(value, reason, meta) {
      const headers: IHeaders = {
        [DeadLetterHeader.REASON]: reason.slice(0, 4_000),
        [DeadLetterHeader.ATTEMPTS]: String(meta.attempts),
        [DeadLetterHeader.WORKER]: opts.workerId,
        [DeadLetterHeader.SOURCE]: meta.source,
        ...(meta.model !== undefined ? { [DeadLetterHeader.MODEL]: meta.model } : {}),
      };
      await producer.send(dead, { key: meta.key ?? null, value, headers });
    },
    async wake(topic, partition) {
      await producer.send(topic, { partition, key: null, value: Buffer.alloc(0), headers: { [WAKE_HEADER]: "1" } });
    },
    stop: () => producer.disconnect(),
  };
}
