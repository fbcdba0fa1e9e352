/** Hands the event loop back: timers and I/O callbacks run before the work continues. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs step-wise work (generators that `yield` between steps) one piece at a time, FIFO, giving
 * the event loop back whenever a slice of `sliceMs` of work has run. The worker tokenizes
 * batch-lane jobs through one: a job of sixteen 256-token documents is ~10 ms of tokenizer time,
 * which would otherwise hold up every interactive record, reply and heartbeat behind it.
 */
export class CooperativeQueue {
  private tail: Promise<unknown> = Promise.resolve();
  private waiting = 0;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly sliceMs = 1,
    private readonly yieldNow: () => Promise<void> = yieldToEventLoop,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Pieces queued or running. */
  get pending(): number {
    return this.waiting;
  }

  /** Queues `steps`; resolves with its return value (rejects with what it throws). */
  run<T>(steps: () => Generator<void, T, void>): Promise<T> {
    this.waiting += 1;
    const result = this.tail.then(() => this.drive(steps()));
    this.tail = result.then(
      () => this.settled(),
      () => this.settled(),
    );
    return result;
  }

  /** Resolves once nothing is queued or running. */
  idle(): Promise<void> {
    if (this.waiting === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async drive<T>(steps: Generator<void, T, void>): Promise<T> {
    // Every piece starts on a fresh turn: whatever arrived while it was queued goes first.
    await this.yieldNow();
    let sliceStart = this.now();
    for (;;) {
      const step = steps.next();
      if (step.done) return step.value;
      if (this.now() - sliceStart >= this.sliceMs) {
        await this.yieldNow();
        sliceStart = this.now();
      }
    }
  }

  private settled(): void {
    this.waiting -= 1;
    if (this.waiting === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
