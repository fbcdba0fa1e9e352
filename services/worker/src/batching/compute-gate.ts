import type { LaneName } from "@shoal/common";
import { systemClock, type Clock } from "./clock.ts";

export interface ComputeGateOptions {
  /**
   * Slots the batch lane leaves free while interactive work is about (an interactive run asked
   * within `reserveWindowMs`), so an interactive run starts at once instead of waiting for a
   * batch-lane call to end. Default 0. Must leave the batch lane at least one slot.
   */
  readonly interactiveReserve?: number;
  /** How long after the last interactive run the reservation holds (default 1,000 ms). */
  readonly reserveWindowMs?: number;
  readonly clock?: Clock;
}

/**
 * The worker's inference capacity, shared by every resident model: at most `slots` model runs
 * at once. Runs are short (a batch-lane batch is cut into calls of a bounded size), and when a
 * slot frees, a waiting interactive run always goes before a waiting batch-lane run: an
 * interactive request waits for at most one batch-lane call, then has the CPU (or GPU) to itself.
 * Within a lane, waiting runs are served round-robin across models and FIFO within a model, so
 * one hot model cannot monopolise the worker while others wait.
 *
 * With several slots (inference threads), `interactiveReserve` of them are kept from the batch
 * lane while interactive work is about: interactive runs then start at once, on a thread of
 * their own, rather than after a batch-lane call.
 */
export class ComputeGate {
  private running = 0;
  private runningBatchLane = 0;
  private lastInteractiveAt = Number.NEGATIVE_INFINITY;
  private cancelReserveTimer: (() => void) | undefined;
  private readonly lanes: Record<LaneName, RoundRobin> = { interactive: new RoundRobin(), batch: new RoundRobin() };
  private readonly reserve: number;
  private readonly reserveWindowMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly slots: number,
    opts: ComputeGateOptions = {},
  ) {
    if (!(Number.isInteger(slots) && slots >= 1)) throw new RangeError(`slots must be an integer >= 1 (got ${slots})`);
    this.reserve = opts.interactiveReserve ?? 0;
    if (!(Number.isInteger(this.reserve) && this.reserve >= 0 && this.reserve < slots)) {
      throw new RangeError(`interactiveReserve must be an integer from 0 to slots - 1 = ${slots - 1} (got ${this.reserve})`);
    }
    this.reserveWindowMs = opts.reserveWindowMs ?? 1_000;
    this.clock = opts.clock ?? systemClock;
  }

  /** Runs in progress and runs waiting, for metrics and tests. */
  get stats(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.lanes.interactive.size + this.lanes.batch.size };
  }

  /** Resolves with a release function (idempotent) once the run may start. */
  acquire(model: string, lane: LaneName): Promise<() => void> {
    if (lane === "interactive") this.lastInteractiveAt = this.clock.now();
    return new Promise((start) => {
      this.lanes[lane].push(model, start);
      this.pump();
    });
  }

  /** Slots the batch lane may hold now. */
  private batchLaneSlots(): number {
    return this.clock.now() - this.lastInteractiveAt < this.reserveWindowMs ? this.slots - this.reserve : this.slots;
  }

  private pump(): void {
    while (this.running < this.slots) {
      let lane: LaneName = "interactive";
      let start = this.lanes.interactive.shift();
      if (start === undefined && this.lanes.batch.size > 0) {
        if (this.runningBatchLane >= this.batchLaneSlots()) return this.armReserveTimer();
        lane = "batch";
        start = this.lanes.batch.shift();
      }
      if (start === undefined) return;
      this.running += 1;
      if (lane === "batch") this.runningBatchLane += 1;
      let released = false;
      start(() => {
        if (released) return;
        released = true;
        this.running -= 1;
        if (lane === "batch") this.runningBatchLane -= 1;
        this.pump();
      });
    }
  }

  /** Batch-lane runs wait only for the reservation: look again when it lapses. */
  private armReserveTimer(): void {
    if (this.cancelReserveTimer) return;
    const due = this.lastInteractiveAt + this.reserveWindowMs - this.clock.now();
    this.cancelReserveTimer = this.clock.setTimer(
      () => {
        this.cancelReserveTimer = undefined;
        this.pump();
      },
      Math.max(0, due),
    );
  }
}

type Start = (release: () => void) => void;

/** FIFO queues per model, served one model at a time in turn. */
class RoundRobin {
  private readonly queues = new Map<string, Start[]>();
  /** Models with waiting runs; the head is served next. */
  private readonly order: string[] = [];
  size = 0;

  push(model: string, start: Start): void {
    let q = this.queues.get(model);
    if (!q) {
      q = [];
      this.queues.set(model, q);
      this.order.push(model);
    }
    q.push(start);
    this.size += 1;
  }

  shift(): Start | undefined {
    const model = this.order.shift();
    if (model === undefined) return undefined;
    const q = this.queues.get(model)!;
    const start = q.shift()!;
    this.size -= 1;
    if (q.length === 0) this.queues.delete(model);
    else this.order.push(model);
    return start;
  }
}
