import type { Kafka } from "kafkajs";
import { createBatchingProducer, encodeResult, ProducerClosedError, type Logger, type RecordSigner } from "@shoal/common";
import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";

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

export function createResultSink(kafka: Kafka, logger: Logger, workerId: string, signer?: RecordSigner): ResultSink {
  const log = logger.child({ component: "result-sink" });
  // Short client-level retries: this sink's own loop retries with backoff, and a long kafkajs retry
  // on one bad reply topic would hold up every other result behind it.
  const producer = createBatchingProducer(kafka, logger, {
    name: "result-producer",
    ...(signer ? { signer } : {}),
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
  });
  let stopping = false;

  return {
    start: () => producer.connect(),
    async send(topic, partition, result, headers) {
      result.workerId = workerId;
      const value = Buffer.from(encodeResult(result));
      for (let attempt = 1; ; attempt++) {
        try {
          return await producer.send(topic, { key: result.jobId, value, partition, ...(headers ? { headers } : {}) });
        } catch (err) {
          if (stopping || err instanceof ProducerClosedError) throw err;
          // A reply topic is deleted when its gateway stops: nobody waits for this result.
          if (attempt >= 3 && /does not host this topic-partition|UNKNOWN_TOPIC/i.test(String((err as Error).message))) {
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
      await producer.disconnect();
    },
  };
}
