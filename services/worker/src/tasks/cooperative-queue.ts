/** Hands the event loop back: timers and I/O callbacks run before the work continues. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Piece {
  readonly steps: Generator<void, unknown, void>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
  /** Time this piece's steps have run so far, ms. */
  ranMs: number;
}

/**
 * Runs step-wise work (generators that `yield` between steps), giving the event loop back whenever
 * a slice of `sliceMs` of work has run. Urgent pieces (the interactive lane) go before others, even
 * in the middle of one. Within each class the piece that has run least goes next (least attained
 * service; the earliest on a tie): a newcomer starts at the next slice, and long pieces take turns.
 * So one job of 256 huge texts delays a one-text job by at most a slice, not by its whole
 * tokenizing (issue #52; it was first in, first out). The worker tokenizes every job through one,
 * so no job's inputs hold up the records, replies and heartbeats behind it for more than a slice
 * (plus one step: one input, bounded by the tokenizer's prefix).
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
      (opts.urgent === true ? this.urgent : this.normal).push({ steps: steps(), resolve: resolve as (v: unknown) => void, reject, ranMs: 0 });
      if (!this.running) void this.drive();
    });
  }

  /** Resolves once nothing is queued or running. */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The next piece: urgent first; within the class, the one that has run least (the earliest on a tie). */
  private next(): { queue: Piece[]; at: number } | undefined {
    const queue = this.urgent.length > 0 ? this.urgent : this.normal;
    if (queue.length === 0) return undefined;
    let at = 0;
    for (let i = 1; i < queue.length; i++) if (queue[i]!.ranMs < queue[at]!.ranMs) at = i;
    return { queue, at };
  }

  private async drive(): Promise<void> {
    this.running = true;
    try {
      while (this.pending > 0) {
        // Every slice starts on a fresh turn: whatever arrived meanwhile goes first.
        await this.yieldNow();
        const sliceStart = this.now();
        let stepStart = sliceStart;
        // One piece per slice (until it ends): switching every step would thrash what a tokenizer
        // keeps between a job's steps (a rerank's query).
        let current = this.next();
        while (current !== undefined && stepStart - sliceStart < this.sliceMs) {
          const { queue, at } = current;
          const piece = queue[at]!;
          let step: IteratorResult<void, unknown> | undefined;
          let failure: { err: unknown } | undefined;
          try {
            step = piece.steps.next();
          } catch (err) {
            failure = { err };
          }
          const stepEnd = this.now();
          piece.ranMs += stepEnd - stepStart;
          stepStart = stepEnd;
          if (failure === undefined && step?.done !== true) continue;
          queue.splice(at, 1);
          if (failure !== undefined) piece.reject(failure.err);
          else piece.resolve(step?.value);
          current = this.next();
        }
      }
    } finally {
      this.running = false;
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}
