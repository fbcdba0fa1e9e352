/** Hands the event loop back: timers and I/O callbacks run before the work continues. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Piece {
  readonly steps: Generator<void, unknown, void>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Runs step-wise work (generators that `yield` between steps) one piece at a time, giving the
 * event loop back whenever a slice of `sliceMs` of work has run. Urgent pieces (the interactive
 * lane) go before others, even in the middle of one; FIFO within each. The worker tokenizes every
 * job through one, so no job's inputs hold up the records, replies and heartbeats behind it for
 * more than a slice (plus one step: one input, bounded by the tokenizer's prefix).
 */
export class CooperativeQueue {
  private readonly urgent: Piece[] = [];
  private readonly normal: Piece[] = [];
  private running = false;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly sliceMs = 1,
    private readonly yieldNow: () => Promise<void> = yieldToEventLoop,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Pieces queued or running. */
  get pending(): number {
    return this.urgent.length + this.normal.length;
  }

  /** Queues `steps` (`urgent`: ahead of the others); resolves with its return value (rejects with what it throws). */
  run<T>(steps: () => Generator<void, T, void>, opts: { urgent?: boolean } = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      (opts.urgent === true ? this.urgent : this.normal).push({ steps: steps(), resolve: resolve as (v: unknown) => void, reject });
      if (!this.running) void this.drive();
    });
  }

  /** Resolves once nothing is queued or running. */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async drive(): Promise<void> {
    this.running = true;
    try {
      while (this.pending > 0) {
        // Every slice starts on a fresh turn: whatever arrived meanwhile goes first.
        await this.yieldNow();
        const sliceStart = this.now();
        while (this.now() - sliceStart < this.sliceMs) {
          const queue = this.urgent.length > 0 ? this.urgent : this.normal;
          const piece = queue[0];
          if (piece === undefined) break;
          let step: IteratorResult<void, unknown>;
          try {
            step = piece.steps.next();
          } catch (err) {
            queue.shift();
            piece.reject(err);
            continue;
          }
          if (step.done === true) {
            queue.shift();
            piece.resolve(step.value);
          }
        }
      }
    } finally {
      this.running = false;
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}
