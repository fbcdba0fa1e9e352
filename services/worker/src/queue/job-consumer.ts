import type { Consumer, Kafka } from "kafkajs";
import type { Logger } from "@shoal/common";
import { OffsetTracker } from "./offset-tracker.ts";

/** One record pulled from a jobs topic. `complete()` once its result is produced. */
export interface PulledRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly value: Buffer | null;
  readonly complete: () => void;
}

export interface JobConsumerOptions {
  readonly groupId: string;
  readonly topics: readonly string[];
  /** Records pulled but not yet completed; past this the consumer stops fetching. */
  readonly maxInFlight: number;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly onRecord: (record: PulledRecord) => void;
}

export interface JobConsumer {
  /** Resolves once the consumer joined its group. */
  start(): Promise<void>;
  /** Stops fetching; records already pulled keep completing. */
  pause(): void;
  /** Commits completed offsets, then leaves the group. */
  stop(): Promise<void>;
  readonly inFlight: number;
}

/**
 * A consumer-group member that pulls job records and hands them on at once, so batches can form
 * across partitions; offsets are committed only up to records whose results were produced.
 * Fetching pauses while `maxInFlight` records are outstanding: memory stays bounded.
 */
export function createJobConsumer(kafka: Kafka, logger: Logger, opts: JobConsumerOptions): JobConsumer {
  const log = logger.child({ component: "job-consumer" });
  const consumer: Consumer = kafka.consumer({
    groupId: opts.groupId,
    sessionTimeout: opts.sessionTimeoutMs,
    heartbeatInterval: opts.heartbeatIntervalMs,
    rebalanceTimeout: Math.max(opts.sessionTimeoutMs, 10_000),
    maxWaitTimeInMs: 250,
    maxBytesPerPartition: 16 * 1024 * 1024,
    allowAutoTopicCreation: false,
  });
  // Trackers of the current group generation; replaced on every (re)join, because kafkajs then
  // resumes each partition from its committed offset.
  let trackers = new Map<string, OffsetTracker>();
  let inFlight = 0;
  let capacityWaiters: Array<() => void> = [];
  let commitScheduled = false;
  let committing: Promise<void> = Promise.resolve();
  let running = false;

  function trackerFor(topic: string, partition: number): OffsetTracker {
    const key = `${topic}\u0000${partition}`;
    let t = trackers.get(key);
    if (!t) trackers.set(key, (t = new OffsetTracker()));
    return t;
  }

  async function commitNow(): Promise<void> {
    const offsets: { topic: string; partition: number; offset: string }[] = [];
    for (const [key, tracker] of trackers) {
      const next = tracker.takeCommittable();
      if (next === undefined) continue;
      const [topic, partition] = key.split("\u0000") as [string, string];
      offsets.push({ topic, partition: Number(partition), offset: String(next) });
    }
    if (offsets.length === 0) return;
    try {
      await consumer.commitOffsets(offsets);
    } catch (err) {
      // A rebalance moved the partitions; the new owner re-reads from the last commit.
      log.warn({ err, partitions: offsets.length }, "offset commit failed; records will be redelivered");
    }
  }

  function scheduleCommit(): void {
    if (commitScheduled) return;
    commitScheduled = true;
    setTimeout(() => {
      commitScheduled = false;
      committing = committing.then(commitNow);
    }, 20);
  }

  function released(): void {
    inFlight -= 1;
    if (inFlight < opts.maxInFlight && capacityWaiters.length > 0) {
      const waiters = capacityWaiters;
      capacityWaiters = [];
      for (const w of waiters) w();
    }
  }

  async function waitForCapacity(heartbeat: () => Promise<void>): Promise<void> {
    while (inFlight >= opts.maxInFlight) {
      await new Promise<void>((resolve) => {
        capacityWaiters.push(resolve);
        setTimeout(resolve, opts.heartbeatIntervalMs);
      });
      await heartbeat();
    }
  }

  return {
    get inFlight() {
      return inFlight;
    },
    async start() {
      await consumer.connect();
      for (const topic of opts.topics) await consumer.subscribe({ topic, fromBeginning: true });
      const joined = new Promise<void>((resolve) => {
        consumer.on(consumer.events.GROUP_JOIN, (e) => {
          trackers = new Map();
          log.info({ assignment: e.payload.memberAssignment, memberId: e.payload.memberId }, "joined group");
          resolve();
        });
      });
      running = true;
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: 64,
        eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
          const tracker = trackerFor(batch.topic, batch.partition);
          for (const message of batch.messages) {
            if (!isRunning() || isStale()) break;
            // Only yield when full: records of one fetch then reach the batcher in one synchronous run.
            if (inFlight >= opts.maxInFlight) await waitForCapacity(heartbeat);
            const offset = Number(message.offset);
            tracker.begin(offset);
            inFlight += 1;
            let completed = false;
            const complete = (): void => {
              if (completed) return;
              completed = true;
              released();
              tracker.complete(offset);
              scheduleCommit();
            };
            // Resolve at once so the next fetch moves on; the commit waits for complete().
            resolveOffset(message.offset);
            try {
              opts.onRecord({ topic: batch.topic, partition: batch.partition, offset: message.offset, value: message.value, complete });
            } catch (err) {
              log.error({ err, topic: batch.topic, partition: batch.partition, offset: message.offset }, "record handler threw; skipping record");
              complete();
            }
          }
          await heartbeat();
        },
      });
      await joined;
    },
    pause() {
      consumer.pause(opts.topics.map((topic) => ({ topic })));
    },
    async stop() {
      if (!running) return;
      running = false;
      await committing;
      await commitNow();
      await consumer.disconnect();
    },
  };
}
