import type { Kafka } from "kafkajs";
import { createResilientConsumer, decodeStatus, RecordDecodeError, SOLO_GROUP_CONSUMER, STATUS_TOPIC, type Logger } from "@shoal/common";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";

/** The live workers, as their status records say; read from the compacted status topic. */
export interface ClusterState {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Workers whose last status is fresh (newer than three of their intervals), by id. */
  workers(nowUnixMs?: number): WorkerStatus[];
}

/** Slack for clock differences between a worker and this gateway. */
const CLOCK_SLACK_MS = 2_000;

/** Whether a status still describes a live worker at `nowUnixMs`. */
export function isFresh(status: WorkerStatus, nowUnixMs: number): boolean {
  const interval = status.intervalMs > 0 ? status.intervalMs : 2_000;
  return nowUnixMs - Number(status.updatedUnixMs) <= 3 * interval + CLOCK_SLACK_MS;
}

/**
 * Reads every worker's status from the start of the status topic (compaction keeps the latest
 * per worker) and keeps following it. A tombstone (empty value) removes a worker that left;
 * a worker that died stops being listed once its status goes stale.
 */
export function createClusterState(kafka: Kafka, logger: Logger, groupId: string): ClusterState {
  const log = logger.child({ component: "cluster-state" });
  const latest = new Map<string, WorkerStatus>();
  // Replaced if kafkajs gives up on it: otherwise the cluster view would freeze after an outage.
  const consumer = createResilientConsumer(kafka, logger, {
    component: "cluster-state",
    consumerConfig: { groupId, ...SOLO_GROUP_CONSUMER, allowAutoTopicCreation: false },
    subscribe: (c) => c.subscribe({ topic: STATUS_TOPIC, fromBeginning: true }),
    run: {
      // Never committed: a replacement consumer reads the compacted topic from its start again
      // (as the first did), and no OffsetCommit follows every status record.
      autoCommit: false,
      eachMessage: async ({ message }) => {
        const key = message.key?.toString() ?? "";
        if (!message.value || message.value.length === 0) {
          latest.delete(key);
          return;
        }
        try {
          const status = decodeStatus(message.value);
          const known = latest.get(status.workerId);
          if (!known || known.updatedUnixMs <= status.updatedUnixMs) latest.set(status.workerId, status);
        } catch (err) {
          if (!(err instanceof RecordDecodeError)) throw err;
          log.warn({ err, offset: message.offset }, "skipping undecodable worker status");
        }
      },
    },
  });

  return {
    start: () => consumer.start(),
    stop: () => consumer.stop(),
    workers(nowUnixMs = Date.now()) {
      return [...latest.values()].filter((s) => isFresh(s, nowUnixMs)).sort((a, b) => a.workerId.localeCompare(b.workerId));
    },
  };
}
