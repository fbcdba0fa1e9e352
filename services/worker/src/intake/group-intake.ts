import type { EachBatchPayload, Kafka } from "kafkajs";
import { createResilientConsumer, type Logger } from "@shoal/common";
import type { Delivery, IntakeHandler, JobIntake, Settlement } from "./intake.ts";
import { OffsetTracker } from "./offset-tracker.ts";

export interface GroupIntakeOptions {
  readonly groupId: string;
  readonly topics: readonly string[];
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  /** Records behind the high watermark after each fetched batch, per partition. */
  readonly onLag?: (topic: string, partition: number, lag: number) => void;
}

/**
 * Consumer-group intake: a group member that pulls job records and hands them on at once, so
 * batches can form across partitions; offsets are committed only up to records settled `done`
 * or `reject` (a `release`d record holds the commit back, so it is read again after the next
 * rebalance or restart). Fetching pauses while the handler has no room: memory stays bounded.
 * Each partition has one owner in a consumer group, so the partition a job was written to picks
 * its worker. If kafkajs crashes the consumer without restarting it (a long broker outage
 * exhausts its retries), a new one replaces it, so the worker recovers when the broker returns.
 */
export function createGroupIntake(kafka: Kafka, logger: Logger, opts: GroupIntakeOptions): JobIntake {
  const log = logger.child({ component: "group-intake" });
  let handler: IntakeHandler | undefined;
  // Trackers of the current group generation; replaced on every (re)join, because kafkajs then
  // resumes each partition from its committed offset.
  let trackers = new Map<string, OffsetTracker>();
  let inFlight = 0;
  let capacityWaiters: Array<() => void> = [];
  let commitScheduled = false;
  let committing: Promise<void> = Promise.resolve();

  function trackerFor(topic: string, partition: number): OffsetTracker {
    const key = `${topic}\u0000${partition}`;
    let t = trackers.get(key);
    if (!t) {
      t = new OffsetTracker();
      trackers.set(key, t);
    }
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
    const consumer = member.consumer;
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

  const hasRoom = (): boolean => (handler?.room() ?? 0) > 0;

  function released(): void {
    inFlight -= 1;
    if (hasRoom() && capacityWaiters.length > 0) {
      const waiters = capacityWaiters;
      capacityWaiters = [];
      for (const w of waiters) w();
    }
  }

  async function waitForCapacity(heartbeat: () => Promise<void>): Promise<void> {
    while (!hasRoom()) {
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
      if (!hasRoom()) await waitForCapacity(heartbeat);
      const offset = Number(message.offset);
      tracker.begin(offset);
      inFlight += 1;
      let settled = false;
      const settle = (outcome: Settlement): void => {
        if (settled) return;
        settled = true;
        released();
        // A released record stays uncommitted: the group reads it again after a rebalance.
        if (outcome === "release" || outcome === "decline") return;
        tracker.complete(offset);
        scheduleCommit();
      };
      // Resolve at once so the next fetch moves on; the commit waits for the settlement.
      resolveOffset(message.offset);
      const delivery: Delivery = {
        topic: batch.topic,
        partition: batch.partition,
        offset: message.offset,
        value: message.value,
        headers: message.headers,
        deliveryCount: 1,
        settle,
      };
      try {
        handler!.deliver(delivery);
      } catch (err) {
        log.error({ err, topic: batch.topic, partition: batch.partition, offset: message.offset }, "record handler threw; skipping record");
        settle("reject");
      }
    }
    opts.onLag?.(batch.topic, batch.partition, Number(batch.offsetLag()));
    await heartbeat();
  }

  const member = createResilientConsumer(kafka, logger, {
    component: "group-intake",
    consumerConfig: {
      groupId: opts.groupId,
      sessionTimeout: opts.sessionTimeoutMs,
      heartbeatInterval: opts.heartbeatIntervalMs,
      rebalanceTimeout: Math.max(opts.sessionTimeoutMs, 10_000),
      maxWaitTimeInMs: 250,
      maxBytesPerPartition: 16 * 1024 * 1024,
      allowAutoTopicCreation: false,
    },
    subscribe: (c) => c.subscribe({ topics: [...opts.topics], fromBeginning: true }),
    run: { autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 64, eachBatch },
    startWhen: "joined",
    onGroupJoin: (e) => {
      // kafkajs resumes each partition from its committed offset after a (re)join.
      trackers = new Map();
      log.info({ assignment: e.payload.memberAssignment, memberId: e.payload.memberId }, "joined group");
    },
    beforeStop: async () => {
      await committing;
      await commitNow();
    },
  });

  return {
    kind: "group",
    get inFlight() {
      return inFlight;
    },
    get ready() {
      return member.joined;
    },
    async start(h) {
      handler = h;
      await member.start();
    },
    pause() {
      member.pause(opts.topics);
    },
    stop: () => member.stop(),
  };
}
