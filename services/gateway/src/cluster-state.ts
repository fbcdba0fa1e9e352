import type { Kafka, KafkaMessage } from "kafkajs";
import { createResilientConsumer, eachRecordInSlices, SOLO_GROUP_CONSUMER, STATUS_TOPIC, type Logger, type RecordSigner } from "@shoal/common";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { type StatusRejection, StatusTable } from "./status-table.ts";

/** The live workers, as their status records say; read from the compacted status topic. */
export interface ClusterState {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Workers whose last status is fresh (newer than three of their intervals), by id. */
  workers(nowUnixMs?: number): WorkerStatus[];
  /** Status entries held in memory (at most `maxWorkers`). */
  readonly size: number;
}

export interface ClusterStateOptions {
  readonly groupId: string;
  /** Most worker entries kept (SHOAL_MAX_WORKERS). */
  readonly maxWorkers: number;
  /** With cluster keys: status records must be signed. */
  readonly signer?: RecordSigner;
  /** A status record refused (forged, malformed, or a new worker past `maxWorkers`). */
  readonly onRejected?: (reason: StatusRejection) => void;
  /** How often expired entries are dropped from memory (default 5 s). */
  readonly sweepEveryMs?: number;
}

/**
 * Reads every worker's status from the start of the status topic (compaction keeps the latest
 * per worker) and keeps following it, into a bounded, expiring StatusTable. A tombstone (empty
 * value) removes a worker that left; a worker that died stops being listed once its status goes
 * stale, and its entry is dropped at the next sweep.
 */
export function createClusterState(kafka: Kafka, logger: Logger, opts: ClusterStateOptions): ClusterState {
  const log = logger.child({ component: "cluster-state" });
  const table = new StatusTable(opts.maxWorkers, opts.signer);
  let sweeper: NodeJS.Timeout | undefined;
  let lastWarnMs = 0;
  const accept = (message: KafkaMessage): void => {
    const now = Date.now();
    const outcome = table.accept(message, now);
    if (outcome !== "signature" && outcome !== "malformed" && outcome !== "capacity") return;
    opts.onRejected?.(outcome);
    // At most one line per 10 s: a flood of forged records must not flood the log too.
    if (now - lastWarnMs >= 10_000) {
      lastWarnMs = now;
      log.warn({ reason: outcome, offset: message.offset, held: table.size, maxWorkers: opts.maxWorkers }, "worker status refused");
    }
  };
  // Replaced if kafkajs gives up on it: otherwise the cluster view would freeze after an outage.
  const consumer = createResilientConsumer(kafka, logger, {
    component: "cluster-state",
    consumerConfig: { groupId: opts.groupId, ...SOLO_GROUP_CONSUMER, allowAutoTopicCreation: false },
    subscribe: (c) => c.subscribe({ topic: STATUS_TOPIC, fromBeginning: true }),
    run: {
      // Never committed: a replacement consumer reads the compacted topic from its start again
      // (as the first did), and no OffsetCommit follows every status record.
      autoCommit: false,
      // In slices that yield between them: a flood of thousands of (forged) status records must
      // not hold up the calls this gateway is serving meanwhile.
      eachBatch: eachRecordInSlices(accept),
    },
  });

  return {
    async start() {
      await consumer.start();
      sweeper = setInterval(() => table.sweep(Date.now()), opts.sweepEveryMs ?? 5_000);
      sweeper.unref();
    },
    async stop() {
      clearInterval(sweeper);
      await consumer.stop();
    },
    workers: (nowUnixMs = Date.now()) => table.workers(nowUnixMs),
    get size() {
      return table.size;
    },
  };
}
