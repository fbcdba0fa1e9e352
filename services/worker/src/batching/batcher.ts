import type { Clock } from "./clock.ts";

/** Something to batch: its cost in tokens and when it reached the batcher. */
export interface BatchItem {
  readonly tokens: number;
  readonly enqueuedAtMs: number;
}

export interface BatcherOptions {
  /** A batch closes when the next item would take it past this many tokens. */
  readonly maxBatchTokens: number;
  readonly maxBatchItems: number;
  /** Longest an item waits for company when the runtime is idle. */
  readonly maxWaitMs: number;
  /** Batches that may run at once (inference threads serving the model). */
  readonly concurrency: number;
}

/** Why a batch closed (for metrics and tests). */
export type CloseReason = "full" | "max-wait" | "drain";

/**
 * Token-budget batcher. A batch closes when it is full (tokens or items), when its oldest item
 * has waited `maxWaitMs`, or at once when its items arrived while an earlier batch was running
 * ("continuous drain": they already waited through a forward pass). Items are taken in arrival
 * order; the runner sorts them by length to limit padding.
 */
export class Batcher<T extends BatchItem> {
  private pending: T[] = [];
  private pendingTokens = 0;
  private running = 0;
  private lastRunEndedAtMs = Number.NEGATIVE_INFINITY;
  private cancelTimer: (() => void) | undefined;
  private idleWaiters: Array<() => void> = [];
  private pumpScheduled = false;

  constructor(
    private readonly opts: BatcherOptions,
    private readonly clock: Clock,
    private readonly run: (items: T[], reason: CloseReason) => Promise<void>,
  ) {}

  get size(): { items: number; tokens: number; running: number } {
    return { items: this.pending.length, tokens: this.pendingTokens, running: this.running };
  }

  /**
   * Adds items. A full batch is dispatched at once; otherwise the decision waits for a microtask,
   * so that items pushed in the same synchronous run (one job's texts, one fetch's records) are
   * considered together even when `maxWaitMs` is 0.
   */
  push(...items: T[]): void {
    for (const item of items) {
      this.pending.push(item);
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
    if (this.pending.length === 0 && this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private closeReason(): CloseReason | undefined {
    const oldest = this.pending[0];
    if (!oldest) return undefined;
    if (this.pendingTokens >= this.opts.maxBatchTokens || this.pending.length >= this.opts.maxBatchItems) return "full";
    if (oldest.enqueuedAtMs <= this.lastRunEndedAtMs) return "drain";
    if (this.clock.now() - oldest.enqueuedAtMs >= this.opts.maxWaitMs) return "max-wait";
    return undefined;
  }

  private pump(): void {
    while (this.running < this.opts.concurrency && this.pending.length > 0) {
      const reason = this.closeReason();
      if (!reason) return this.armTimer();
      this.dispatch(this.take(), reason);
    }
  }

  private armTimer(): void {
    const oldest = this.pending[0];
    if (!oldest || this.cancelTimer) return;
    const dueIn = Math.max(0, oldest.enqueuedAtMs + this.opts.maxWaitMs - this.clock.now());
    this.cancelTimer = this.clock.setTimer(() => {
      this.cancelTimer = undefined;
      this.pump();
    }, dueIn);
  }

  /** Takes items in arrival order up to the token and item budgets (at least one). */
  private take(): T[] {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    let tokens = 0;
    let count = 0;
    for (const item of this.pending) {
      if (count > 0 && (tokens + item.tokens > this.opts.maxBatchTokens || count >= this.opts.maxBatchItems)) break;
      tokens += item.tokens;
      count += 1;
    }
    const batch = this.pending.splice(0, count);
    this.pendingTokens -= tokens;
    return batch;
  }

  private dispatch(batch: T[], reason: CloseReason): void {
    this.running += 1;
    this.run(batch, reason)
      .catch(() => undefined) // the runner answers its own failures; never let one stall the loop
      .finally(() => {
        this.running -= 1;
        this.lastRunEndedAtMs = this.clock.now();
        this.pump();
        if (this.pending.length === 0 && this.running === 0) {
          const waiters = this.idleWaiters;
          this.idleWaiters = [];
          for (const w of waiters) w();
        }
      });
  }
}
