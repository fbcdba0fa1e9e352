import type { Consumer, Kafka } from "kafkajs";
import { createResilientConsumer, type Logger } from "@shoal/common";
import { isOpen } from "./batch-state.ts";
import { type BatchStore, type BatchTopics, WORK_PARTITIONS } from "./batch-store.ts";

/** The work-topic partition that owns batch `id` (FNV-1a of the id). */
export function partitionOfBatch(id: string, partitions: number = WORK_PARTITIONS): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}

export interface BatchOwnersOptions {
  readonly topics: BatchTopics;
  readonly store: BatchStore;
  /** Runs batch `id` until it is final or `signal` fires (ownership lost, stop). */
  readonly run: (id: string, signal: AbortSignal) => Promise<void>;
  /** Delay before a run that failed is tried again while this gateway still owns it. */
  readonly retryAfterMs?: number;
}

export interface BatchOwners {
  start(): Promise<void>;
  /** Stops every run (each saves what it finished) and leaves the group. */
  stop(): Promise<void>;
  /** Batch ids running here (tests, diagnostics). */
  readonly running: ReadonlySet<string>;
}

/**
 * Who runs which batch: every gateway joins one consumer group over the work topic, and the
 * gateway assigned a batch's partition ({@link partitionOfBatch}) runs it. The topic holds no
 * records; the group is only the broker's way of sharing partitions among the live gateways, with
 * its session timeout as the failure detector: a gateway that dies loses its partitions within
 * seconds and the survivors resume its batches from their last snapshots. A rebalance stops every
 * run here at once (kafkajs' rebalances are eager); each saves what it finished, and the new
 * owner goes on from there. Two gateways may briefly run the same batch across a rebalance: work
 * is done twice, but since a snapshot is a whole, self-consistent state (batch-records.ts), no
 * line is ever written twice.
 */
export function createBatchOwners(kafka: Kafka, logger: Logger, opts: BatchOwnersOptions): BatchOwners {
  const log = logger.child({ component: "batch-owners" });
  const retryAfterMs = opts.retryAfterMs ?? 5_000;
  let assigned = new Set<number>();
  const runs = new Map<string, { controller: AbortController; done: Promise<void> }>();
  const retryTimers = new Set<NodeJS.Timeout>();
  let stopped = false;

  const owns = (id: string): boolean => !stopped && assigned.has(partitionOfBatch(id));

  function reconcile(id: string): void {
    const view = opts.store.state.batch(id);
    const want = view !== undefined && isOpen(view) && owns(id);
    const run = runs.get(id);
    if (want && run === undefined) launch(id);
    else if (!want && run !== undefined && (view === undefined || !owns(id))) run.controller.abort(new Error("batch no longer owned here"));
  }

  function reconcileAll(): void {
    for (const id of opts.store.state.batchIds()) reconcile(id);
    for (const id of runs.keys()) reconcile(id);
  }

  function launch(id: string): void {
    const controller = new AbortController();
    let retrying = false;
    const done = opts
      .run(id, controller.signal)
      .catch((err: unknown) => {
        if (!controller.signal.aborted) {
          retrying = true;
          log.warn({ err, batch: id }, `batch run failed; trying again in ${retryAfterMs} ms`);
          const timer = setTimeout(() => {
            retryTimers.delete(timer);
            reconcile(id);
          }, retryAfterMs);
          retryTimers.add(timer);
        }
      })
      .finally(() => {
        if (runs.get(id)?.controller === controller) runs.delete(id);
        // Stopped by a rebalance that gave the batch back to this gateway: run it again.
        if (!retrying) reconcile(id);
      });
    runs.set(id, { controller, done });
    log.info({ batch: id, partition: partitionOfBatch(id) }, "batch run started");
  }

  function revokeAll(why: string): void {
    if (assigned.size === 0) return;
    assigned = new Set();
    log.info({ why, running: runs.size }, "batch partitions revoked: runs stop");
    for (const r of runs.values()) r.controller.abort(new Error(why));
  }

  const consumer = createResilientConsumer(kafka, logger, {
    component: "batch-owners",
    consumerConfig: { groupId: opts.topics.runnersGroup, sessionTimeout: 10_000, heartbeatInterval: 2_000, rebalanceTimeout: 20_000, maxWaitTimeInMs: 1_000 },
    subscribe: (c) => c.subscribe({ topic: opts.topics.work, fromBeginning: true }),
    // Nothing is ever written to the work topic.
    run: { autoCommit: false, eachMessage: async () => undefined },
    onGroupJoin(e) {
      assigned = new Set(e.payload.memberAssignment[opts.topics.work] ?? []);
      log.info({ partitions: [...assigned] }, "batch partitions assigned");
      reconcileAll();
    },
    onConsumer(c: Consumer) {
      c.on(c.events.REBALANCING, () => revokeAll("rebalance"));
      c.on(c.events.STOP, () => revokeAll("consumer stopped"));
      c.on(c.events.CRASH, () => revokeAll("consumer crashed"));
    },
  });

  opts.store.onBatchChange((id) => reconcile(id));

  return {
    start: () => consumer.start(),
    async stop() {
      stopped = true;
      for (const t of retryTimers) clearTimeout(t);
      for (const r of runs.values()) r.controller.abort(new Error("gateway stopping"));
      await Promise.all([...runs.values()].map((r) => r.done));
      await consumer.stop();
    },
    get running() {
      return new Set(runs.keys());
    },
  };
}
