import type { Consumer, EachBatchPayload, IHeaders, Kafka } from "kafkajs";
import type { Logger } from "@shoal/common";
import { OffsetTracker } from "./offset-tracker.ts";

/** One record pulled from a jobs topic. `complete()` once its result is produced. */
export interface PulledRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly value: Buffer | null;
  readonly headers: IHeaders | undefined;
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
  /** Records behind the high watermark after each fetched batch, per partition. */
  readonly onLag?: (topic: string, partition: number, lag: number) => void;
}

export interface JobConsumer {
  /** Resolves once the consumer joined its group. */
  start(): Promise<void>;
  /** Stops fetching; records already pulled keep completing. */
  pause(): void;
  /** Commits completed offsets, then leaves the group. */
  stop(): Promise<void>;
  readonly inFlight: number;
  /** Whether the consumer is a member of its group right now. */
  readonly joined: boolean;
}

/** Delay before a consumer that kafkajs gave up on is replaced. */
const REPLACE_AFTER_MS = 1_000;

/**
 * A consumer-group member that pulls job records and hands them on at once, so batches can form
 * across partitions; offsets are committed only up to records whose results were produced.
 * Fetching pauses while `maxInFlight` records are outstanding: memory stays bounded. If kafkajs
 * crashes the consumer without restarting it (a long broker outage exhausts its retries), a new
 * one replaces it, so the worker recovers by itself when the broker returns.
 */
export function createJobConsumer(kafka: Kafka, logger: Logger, opts: JobConsumerOptions): JobConsumer {
  const log = logger.child({ component: "job-consumer" });
  let consumer: Consumer | undefined;
  // Trackers of the current group generation; replaced on every (re)join, because kafkajs then
  // resumes each partition from its committed offset.
  let trackers = new Map<string, OffsetTracker>();
  let inFlight = 0;
  let capacityWaiters: Array<() => void> = [];
  let commitScheduled = false;
  let committing: Promise<void> = Promise.resolve();
  let running = false;
  let joinedGroup = false;

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
    if (offsets.length === 0 || !consumer) return;
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

  async function eachBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
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
        opts.onRecord({
          topic: batch.topic,
          partition: batch.partition,
          offset: message.offset,
          value: message.value,
          headers: message.headers,
          complete,
        });
      } catch (err) {
        log.error({ err, topic: batch.topic, partition: batch.partition, offset: message.offset }, "record handler threw; skipping record");
        complete();
      }
    }
    opts.onLag?.(batch.topic, batch.partition, Number(batch.offsetLag()));
    await heartbeat();
  }

  /** Creates a consumer, joins the group and starts pulling; resolves on the first join. */
  async function join(): Promise<void> {
    const c = kafka.consumer({
      groupId: opts.groupId,
      sessionTimeout: opts.sessionTimeoutMs,
      heartbeatInterval: opts.heartbeatIntervalMs,
      rebalanceTimeout: Math.max(opts.sessionTimeoutMs, 10_000),
      maxWaitTimeInMs: 250,
      maxBytesPerPartition: 16 * 1024 * 1024,
      allowAutoTopicCreation: false,
    });
    consumer = c;
    const joined = new Promise<void>((resolve) => {
      c.on(c.events.GROUP_JOIN, (e) => {
        trackers = new Map();
        joinedGroup = true;
        log.info({ assignment: e.payload.memberAssignment, memberId: e.payload.memberId }, "joined group");
        resolve();
      });
    });
    c.on(c.events.REBALANCING, () => (joinedGroup = false));
    c.on(c.events.STOP, () => (joinedGroup = false));
    c.on(c.events.CRASH, (e) => {
      joinedGroup = false;
      if (e.payload.restart || !running || consumer !== c) return;
      log.error({ err: e.payload.error }, `consumer crashed for good; replacing it in ${REPLACE_AFTER_MS} ms`);
      setTimeout(() => void replace(c), REPLACE_AFTER_MS);
    });
    await c.connect();
    for (const topic of opts.topics) await c.subscribe({ topic, fromBeginning: true });
    await c.run({ autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 64, eachBatch });
    await joined;
  }

  async function replace(old: Consumer): Promise<void> {
    if (!running || consumer !== old) return;
    await old.disconnect().catch(() => undefined);
    try {
      await join();
    } catch (err) {
      log.warn({ err }, `could not rejoin; retrying in ${REPLACE_AFTER_MS} ms`);
      setTimeout(() => void replace(consumer ?? old), REPLACE_AFTER_MS);
    }
  }

  return {
    get inFlight() {
      return inFlight;
    },
    get joined() {
      return joinedGroup;
    },
    async start() {
      running = true;
      await join();
    },
    pause() {
      consumer?.pause(opts.topics.map((topic) => ({ topic })));
    },
    async stop() {
      if (!running) return;
      running = false;
      await committing;
      await commitNow();
      await consumer?.disconnect();
    },
  };
}
