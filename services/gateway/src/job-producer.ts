import type { Kafka, Message } from "kafkajs";
import { createBatchingProducer, ProducerClosedError, ProducerNotConnectedError, RecordWithdrawnError, type Logger, type RecordSigner } from "@shoal/common";
import { QueueUnavailableError } from "./errors.ts";

/** Produces job envelopes; every failure surfaces as QueueUnavailableError (→ Unavailable). */
export interface JobProducer {
  /** How long `send` waits for the broker's acknowledgement before it fails (ms). */
  readonly ackTimeoutMs: number;
  start(): Promise<void>;
  send(topic: string, message: Message): Promise<void>;
  /** Takes back a record still waiting to go out (its caller left): it is never written. @returns whether it was */
  withdraw(message: Message): boolean;
  stop(): Promise<void>;
}

/** Errors that say the record never left this process. */
function neverSent(err: unknown): boolean {
  return err instanceof ProducerNotConnectedError || err instanceof ProducerClosedError || err instanceof RecordWithdrawnError;
}

/**
 * @param ackTimeoutMs a record not acknowledged within this time fails the call with Unavailable
 *   (kafkajs would otherwise keep retrying for many seconds while the broker is away)
 */
export function createJobProducer(kafka: Kafka, logger: Logger, ackTimeoutMs = 3_000, signer?: RecordSigner): JobProducer {
  const log = logger.child({ component: "jobs-out" });
  const producer = createBatchingProducer(kafka, logger, {
    name: "job-producer",
    ...(signer ? { signer } : {}),
    // Fail fast when the broker is gone: the caller gets Unavailable instead of a hang.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
    // Its callers are already answered Unavailable by then: switch to a new producer at once.
    stuckAfterMs: ackTimeoutMs,
  });
  return {
    ackTimeoutMs,
    start: () => producer.connect(),
    async send(topic, message) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not acknowledged within ${ackTimeoutMs} ms`)), ackTimeoutMs);
      });
      try {
        await Promise.race([producer.send(topic, message), timeout]);
        log.debug({ jobId: String(message.key), topic }, "job written");
      } catch (err) {
        // Still queued behind a stuck request (a new producer still connecting): taken back, so it is
        // never written later for a call already answered. Otherwise it went out and, unless the
        // producer could not even connect, the broker may have written it without answering.
        const maybeWritten = !producer.withdraw(message) && !neverSent(err);
        log.debug(
          { jobId: String(message.key), topic, maybeWritten, err: (err as Error).message },
          "job not acknowledged in time (maybeWritten: it went out, another copy follows; otherwise the call is answered Unavailable)",
        );
        throw new QueueUnavailableError(`job queue unavailable: ${(err as Error).message}`, maybeWritten);
      } finally {
        clearTimeout(timer);
      }
    },
    withdraw: (message) => producer.withdraw(message),
    stop: () => producer.disconnect(),
  };
}
