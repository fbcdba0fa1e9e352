import { randomBytes } from "node:crypto";
import type { Consumer, Kafka } from "kafkajs";
import { decodeCancel, RecordDecodeError, type Logger } from "@shoal/common";
import type { CancelSet } from "./cancel-set.ts";

/**
 * Reads the pool's cancel topic as a group of one (every worker sees every cancel), from the
 * latest offset: a cancel older than this worker concerns jobs another worker already had.
 */
export function createCancelConsumer(
  kafka: Kafka,
  logger: Logger,
  opts: { topic: string; workerId: string; cancels: CancelSet },
): { start(): Promise<void>; stop(): Promise<void> } {
  const log = logger.child({ component: "cancel-consumer" });
  const consumer: Consumer = kafka.consumer({
    groupId: `shoal-cancel-${opts.workerId}-${randomBytes(4).toString("hex")}`,
    sessionTimeout: 10_000,
    heartbeatInterval: 1_000,
    maxWaitTimeInMs: 250,
    allowAutoTopicCreation: false,
  });
  let running = false;
  return {
    async start() {
      await consumer.connect();
      await consumer.subscribe({ topic: opts.topic, fromBeginning: false });
      running = true;
      await consumer.run({
        eachMessage: async ({ message }) => {
          try {
            const cancel = decodeCancel(message.value);
            opts.cancels.add(cancel.jobId, Number(cancel.deadlineUnixMs));
          } catch (err) {
            if (!(err instanceof RecordDecodeError)) throw err;
            log.warn({ err }, "skipping undecodable cancel record");
          }
        },
      });
    },
    async stop() {
      if (!running) return;
      running = false;
      await consumer.disconnect();
      // The group was this worker's alone; nothing else will use it.
    },
  };
}
