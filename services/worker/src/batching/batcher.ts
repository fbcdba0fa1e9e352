import type { LaneName } from "@shoal/common";
import type { Clock } from "./clock.ts";

/** Something to batch: its cost in tokens, its lane, when it arrived and when it is due. */
export interface BatchItem {
  readonly tokens: number;
  readonly enqueuedAtMs: number;
  readonly lane: LaneName;
  /** Clock time after which the item is useless (Infinity: none). */
  readonly deadlineMs: number;
  /** The request it belongs to: within a lane, requests take turns (none: a request of its own). */
  readonly group?: object;
}

/**
 * `queue` in the order a batch takes it: every request's first item (requests in the order they
 * first appear), then every request's second, and so on. So a one-text call queued behind four
 * calls of 256 texts goes in the next batch, not after 1,024 texts (issue #52); alone, or with
 * requests of one item each, the order is the queue's own.
 */
export function takingTurns<T extends BatchItem>(queue: readonly T[]): T[] {
  const rounds: T[][] = [];
  const seen = new Map<object, number>();
  for (const item of queue) {
    const turn = item.group === undefined ? 0 : (seen.get(item.group) ?? 0);
    if (item.group !== undefined) seen.set(item.group, turn + 1);
    const round = rounds[turn];
    if (round === undefined) rounds[turn] = [item];
    else round.push(item);
  }
  return rounds.flat();
}

/**
 * - `token-budget` (default): close on the token budget, the item cap, max wait, an early
 *   deadline, or at once for items that waited through a forward pass; the runner sorts by
 *   length and splits to limit padding.
 * - `fixed-window`: close on the item cap or max wait only, one padded call (the classic dynamic
 *   batcher, kept for comparison).
 */
export type BatchPolicy = "token-budget" | "fixed-window";

export interface BatcherOptions {
  readonly policy: BatchPolicy;
  /** A batch closes when the next item would take it past this many tokens (token-budget). */
  readonly maxBatchTokens: number;
  readonly maxBatchItems: number;
  /** Longest an item waits for company when the runtime is idle. */
  readonly maxWaitMs: number;
  /** Batches of any lane that may run at once (inference threads serving the model). */
  readonly concurrency: number;
  /**
   * Further batches of interactive items only that may start while a batch-lane batch runs
   * (threads reserved for the interactive lane): an interactive request never waits for a
   * batch-lane forward pass.
   */
  readonly interactiveSlots: number;
  /** Share of a batch's token budget the batch lane is guaranteed when both lanes wait. */
  readonly batchLaneShare: number;
  /** A batch-lane item that waited this long is served like an interactive one (aging). */
  readonly batchLaneAgingMs: number;
}

/** A batch's token budget unless the catalog or SHOAL_BATCH_MAX_TOKENS sets one. */
export const DEFAULT_BATCH_MAX_TOKENS = 2_048;

export const defaultBatcherOptions: BatcherOptions = {
  policy: "token-budget",
  maxBatchTokens: DEFAULT_BATCH_MAX_TOKENS,
  maxBatchItems: 128,
  maxWaitMs: 0,
  concurrency: 1,
  interactiveSlots: 0,
  batchLaneShare: 0.25,
  batchLaneAgingMs: 2_000,
};

/** Why a batch closed (for metrics and tests). */
export type CloseReason = "full" | "max-wait" | "drain" | "deadline";

/**
 * Waits for the compute a batch will run on (the worker's compute gate, shared by its models) and
 * resolves with the function that gives it back. `lane` is the lane of the batch's first call.
 */
export type AdmitBatch = (lane: LaneName) => Promise<() => void>;

/**
 * One model's batcher: two lanes, interactive served first, the batch lane guaranteed a share of
 * every batch and promoted when it waited too long, so neither starves. Time comes from an
 * injected clock; the cost of a run is learned (ms per token) to close a batch early when waiting
 * longer would make its tightest member miss its deadline.
 */
export class Batcher<T extends BatchItem> {
  private interactive: T[] = [];
  private batchLane: T[] = [];
  private pendingTokens = 0;
  private running = 0;
  /** Running batches that hold batch-lane items. */
  private runningBatchLane = 0;
  private lastRunEndedAtMs = Number.NEGATIVE_INFINITY;
  private cancelTimer: (() => void) | undefined;
  private idleWaiters: Array<() => void> = [];
  private pumpScheduled = false;
  /** Learned run cost, ms per token (EWMA); 0 until the first run. */
  private msPerToken = 0;

  /**
   * @param run runs a closed batch; `slot`, when given, is the compute `admit` granted for its
   *   first call, and `run` must give it back (use it or call it)
   * @param admit when set, a batch closes only once this grants it the compute, so the items that
   *   arrive while it waits for another model's run ride along instead of forming a second batch
   *   that pays another call's fixed cost (on an accelerator, most of a small batch's cost)
   */
  constructor(
    private readonly opts: BatcherOptions,
    private readonly clock: Clock,
    private readonly run: (items: T[], reason: CloseReason, slot?: () => void) => Promise<void>,
    private readonly admit?: AdmitBatch,
  ) {}

  get size(): { items: number; tokens: number; running: number } {
    return { items: this.interactive.length + this.batchLane.length, tokens: this.pendingTokens, running: this.running };
  }

  /**
   * Adds items. A full batch is dispatched at once; otherwise the decision waits for a microtask,
   * so that items pushed in the same synchronous run (one job's texts, one fetch's records) are
   * considered together even when `maxWaitMs` is 0.
   */
  push(...items: T[]): void {
    for (const item of items) {
      (item.lane === "batch" ? this.batchLane : this.interactive).push(item);
      this.pendingTokens += item.tokens;
    }
    if (this.closeReason() === "full") this.pump();
    else if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      queueMicrotask(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
  }

  /** Resolves when nothing is pending or running. */
  idle(): Promise<void> {
    if (this.size.items === 0 && this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private oldestEnqueuedAt(): number {
    return Math.min(this.interactive[0]?.enqueuedAtMs ?? Infinity, this.batchLane[0]?.enqueuedAtMs ?? Infinity);
  }

  /** When the tightest deadline forces the batch to start, given what running it should take. */
  private deadlineDueAt(): number {
    let tightest = Infinity;
    for (const item of this.interactive) tightest = Math.min(tightest, item.deadlineMs);
    for (const item of this.batchLane) tightest = Math.min(tightest, item.deadlineMs);
    const estimatedRunMs = this.msPerToken * Math.min(this.pendingTokens, this.opts.maxBatchTokens);
    return tightest - estimatedRunMs;
  }

  private closeReason(): CloseReason | undefined {
    const count = this.size.items;
    if (count === 0) return undefined;
    const oldest = this.oldestEnqueuedAt();
    const now = this.clock.now();
    if (count >= this.opts.maxBatchItems) return "full";
    if (this.opts.policy === "fixed-window") return now - oldest >= this.opts.maxWaitMs ? "max-wait" : undefined;
    if (this.pendingTokens >= this.opts.maxBatchTokens) return "full";
    if (oldest <= this.lastRunEndedAtMs) return "drain";
    if (now - oldest >= this.opts.maxWaitMs) return "max-wait";
    if (this.deadlineDueAt() <= now) return "deadline";
    return undefined;
  }

  private pump(): void {
    while (this.size.items > 0) {
      const general = this.running < this.opts.concurrency;
      // The reserved slots exist so interactive work never waits behind the batch lane; they do
      // not run interactive batches side by side (that only splits the same cores).
      const reserved =
        !general && this.runningBatchLane > 0 && this.running < this.opts.concurrency + this.opts.interactiveSlots && this.interactive.length > 0;
      if (!general && !reserved) return;
      const reason = this.closeReason();
      if (!reason) return this.armTimer();
      if (this.admit === undefined) this.dispatch(this.take(reserved), reason);
      else this.admitWhenGranted(reserved, reason, this.admit);
    }
  }

  /**
   * Waits for the compute, then takes the batch as it is by then (items that came meanwhile
   * included). Until then the admission counts as a running batch of its lane, so an interactive
   * item that comes meanwhile may still take a reserved slot, as it would beside a running batch.
   */
  private admitWhenGranted(interactiveOnly: boolean, reason: CloseReason, admit: AdmitBatch): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const lane: LaneName = interactiveOnly || this.interactive.length > 0 ? "interactive" : "batch";
    this.running += 1;
    if (lane === "batch") this.runningBatchLane += 1;
    void admit(lane).then((slot) => {
      this.running -= 1;
      if (lane === "batch") this.runningBatchLane -= 1;
      const items = interactiveOnly ? this.interactive.length : this.size.items;
      if (items === 0) {
        // Taken by another admission meanwhile.
        slot();
        this.pump();
        this.notifyIdle();
        return;
      }
      this.dispatch(this.take(interactiveOnly), reason, slot);
      this.pump();
    });
  }

  private armTimer(): void {
    if (this.cancelTimer || this.size.items === 0) return;
    let due = this.oldestEnqueuedAt() + this.opts.maxWaitMs;
    if (this.opts.policy === "token-budget") due = Math.min(due, this.deadlineDueAt());
    this.cancelTimer = this.clock.setTimer(
      () => {
        this.cancelTimer = undefined;
        this.pump();
      },
      Math.max(0, due - this.clock.now()),
    );
  }

  /**
   * Interactive items first, up to the budget minus the batch lane's guaranteed share (when the
   * batch lane waits), then batch-lane items, then interactive again if room is left; within a
   * lane, requests take turns ({@link takingTurns}). A batch-lane
   * head that waited past the aging limit is taken even when it does not fit the share: at most
   * one such item per batch, so the batch lane always progresses and interactive never waits
   * behind more than one batch.
   */
  private take(interactiveOnly = false): T[] {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    const budget = this.opts.policy === "fixed-window" ? Infinity : this.opts.maxBatchTokens;
    const taken: T[] = [];
    let tokens = 0;
    const fill = (queue: T[], limit: number, forceFirst = false): void => {
      const picked = new Set<T>();
      for (const item of takingTurns(queue)) {
        if (taken.length >= this.opts.maxBatchItems) break;
        const forced = forceFirst && picked.size === 0;
        if (!forced && taken.length > 0 && tokens + item.tokens > limit) break;
        taken.push(item);
        picked.add(item);
        tokens += item.tokens;
      }
      if (picked.size === 0) return;
      // What is left keeps its arrival order (the head is the oldest: waits and aging read it).
      let kept = 0;
      for (const item of queue) if (!picked.has(item)) queue[kept++] = item;
      queue.length = kept;
    };
    if (interactiveOnly) {
      fill(this.interactive, budget);
      this.pendingTokens -= tokens;
      return taken;
    }
    const head = this.batchLane[0];
    const reserve = head ? budget * this.opts.batchLaneShare : 0;
    const aged = head !== undefined && this.clock.now() - head.enqueuedAtMs >= this.opts.batchLaneAgingMs;
    fill(this.interactive, budget - Math.max(reserve, aged ? Math.min(head.tokens, budget) : 0));
    fill(this.batchLane, budget, aged);
    fill(this.interactive, budget);
    this.pendingTokens -= tokens;
    return taken;
  }

  private dispatch(batch: T[], reason: CloseReason, slot?: () => void): void {
    this.running += 1;
    const holdsBatchLane = batch.some((i) => i.lane === "batch");
    if (holdsBatchLane) this.runningBatchLane += 1;
    const started = this.clock.now();
    const tokens = batch.reduce((n, i) => n + i.tokens, 0);
    this.run(batch, reason, slot)
      .catch(() => undefined) // the runner answers its own failures; never let one stall the loop
      .finally(() => {
        this.running -= 1;
        if (holdsBatchLane) this.runningBatchLane -= 1;
        const ended = this.clock.now();
        if (tokens > 0 && ended > started) {
          const sample = (ended - started) / tokens;
          this.msPerToken = this.msPerToken === 0 ? sample : 0.8 * this.msPerToken + 0.2 * sample;
        }
        this.lastRunEndedAtMs = ended;
        this.pump();
        this.notifyIdle();
      });
  }

  private notifyIdle(): void {
    if (this.size.items !== 0 || this.running !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
