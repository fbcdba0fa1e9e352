import type { Consumer, Kafka } from "kafkajs";
import { decodeResult, RecordDecodeError, type Logger } from "@shoal/common";
import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { SettleOutcome } from "./pending-jobs.ts";

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
}

/**
 * Reads this gateway replica's reply topic and hands each result to its waiting call.
 * Undecodable records are logged and skipped; results nobody waits for (duplicates, late
 * answers to calls that already ended) are dropped.
 */
export function createReplyConsumer(kafka: Kafka, logger: Logger, opts: ReplyConsumerOptions): ReplyConsumer {
  const log = logger.child({ component: "reply-consumer" });
  const consumer: Consumer = kafka.consumer({
    groupId: opts.groupId,
    sessionTimeout: 10_000,
    heartbeatInterval: 1_000,
    maxWaitTimeInMs: 500,
    allowAutoTopicCreation: false,
  });
  let running = false;

  return {
    async start() {
      await consumer.connect();
      // The topic was created by this replica just before: reading it from the start loses nothing.
      await consumer.subscribe({ topic: opts.topic, fromBeginning: true });
      const joined = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`reply consumer did not join its group within ${opts.joinTimeoutMs ?? 30_000} ms`)),
          opts.joinTimeoutMs ?? 30_000,
        );
        consumer.on(consumer.events.GROUP_JOIN, () => {
          clearTimeout(timer);
          resolve();
        });
      });
      running = true;
      await consumer.run({
        eachBatchAutoResolve: true,
        eachBatch: async ({ batch, heartbeat }) => {
          let dropped = 0;
          for (const message of batch.messages) {
            try {
              if (opts.onResult(decodeResult(message.value)) === "unknown") dropped += 1;
            } catch (err) {
              if (!(err instanceof RecordDecodeError)) throw err;
              log.warn({ err, partition: batch.partition, offset: message.offset }, "skipping undecodable reply");
            }
          }
          if (dropped > 0) log.debug({ dropped }, "results with no waiting call dropped (late or duplicate)");
          await heartbeat();
        },
      });
      await joined;
    },
    async stop() {
      if (!running) return;
      running = false;
      await consumer.disconnect();
    },
  };
}
