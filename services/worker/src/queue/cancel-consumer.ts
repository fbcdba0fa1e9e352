import type { Kafka } from "kafkajs";
import {
  createResilientConsumer,
  decodeCancel,
  eachRecordInSlices,
  RecordDecodeError,
  SIGNATURE_HEADER,
  SOLO_GROUP_CONSUMER,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
import type { CancelSet } from "./cancel-set.ts";

/** The cancel topic's consumer group of one worker: one per worker id, never a fresh one per start. */
export function cancelGroupId(workerId: string): string {
  return `shoal-cancel-${workerId}`;
}

/**
 * Reads the pool's cancel topic as a group of one (every worker sees every cancel), from the
 * latest offset: a cancel older than this worker concerns jobs another worker already had.
 *
 * The group is this worker's alone and must not outlive it. Its id is stable per worker id (a
 * restart under the same id reuses it), it never commits an offset (so every start reads from the
 * latest offset, and an abandoned group holds no offsets: the broker removes it at its next
 * offsets-retention sweep instead of keeping it for `offsets.retention.minutes`), and a clean stop
 * deletes it at once. Replaced if kafkajs crashes it for good, so cancels keep arriving after a
 * long broker outage.
 */
export function createCancelConsumer(
  kafka: Kafka,
  logger: Logger,
  opts: { topic: string; workerId: string; cancels: CancelSet; signer?: RecordSigner },
): { start(): Promise<void>; stop(): Promise<void> } {
  const log = logger.child({ component: "cancel-consumer" });
  const consumer = createResilientConsumer(kafka, logger, {
    component: "cancel-consumer",
    consumerConfig: {
      groupId: cancelGroupId(opts.workerId),
      ...SOLO_GROUP_CONSUMER,
      allowAutoTopicCreation: false,
    },
    subscribe: (c) => c.subscribe({ topic: opts.topic, fromBeginning: false }),
    run: {
      autoCommit: false,
      // In slices that yield between them: a burst of cancels must not stall the worker.
      eachBatch: eachRecordInSlices((message) => {
        if (opts.signer !== undefined && !opts.signer.verify("cancel", message.value, message.headers?.[SIGNATURE_HEADER])) {
          log.warn({ offset: message.offset }, "skipping a cancel record without a valid signature");
          return;
        }
        try {
          const cancel = decodeCancel(message.value);
          opts.cancels.add(cancel.jobId, Number(cancel.deadlineUnixMs));
        } catch (err) {
          if (!(err instanceof RecordDecodeError)) throw err;
          log.warn({ err }, "skipping undecodable cancel record");
        }
      }),
    },
    deleteGroupOnStop: true,
  });
  return { start: () => consumer.start(), stop: () => consumer.stop() };
}
