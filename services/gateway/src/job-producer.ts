import type { Kafka, Message } from "kafkajs";
import { createBatchingProducer, type Logger } from "@shoal/common";
import { QueueUnavailableError } from "./errors.ts";

/** Produces job envelopes; every failure surfaces as QueueUnavailableError (→ Unavailable). */
export interface JobProducer {
  start(): Promise<void>;
  send(topic: string, message: Message): Promise<void>;
  stop(): Promise<void>;
}

export function createJobProducer(kafka: Kafka, logger: Logger): JobProducer {
  const producer = createBatchingProducer(kafka, logger, {
    name: "job-producer",
    // Fail fast when the broker is gone: the caller gets Unavailable instead of a hang.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
  });
  return {
    start: () => producer.connect(),
    async send(topic, message) {
      try {
        await producer.send(topic, message);
      } catch (err) {
        throw new QueueUnavailableError(`job queue unavailable: ${(err as Error).message}`);
      }
    },
    stop: () => producer.disconnect(),
  };
}
