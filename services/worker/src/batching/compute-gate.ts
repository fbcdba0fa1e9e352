import type { LaneName } from "./batcher.ts";

/**
 * The worker's inference capacity, shared by every resident model: at most `slots` model runs
 * at once. Runs are short (a batch-lane batch is cut into calls of a bounded size), and when a
 * slot frees, a waiting interactive run always goes before a waiting batch-lane run: an
 * interactive request waits for at most one batch-lane call, then has the CPU (or GPU) to itself.
 * Within a lane, waiting runs are served round-robin across models and FIFO within a model, so
 * one hot model cannot monopolise the worker while others wait.
 */
export class ComputeGate {
  private running = 0;
  private readonly lanes: Record<LaneName, RoundRobin> = { interactive: new RoundRobin(), batch: new RoundRobin() };

  constructor(private readonly slots: number) {
    if (!(Number.isInteger(slots) && slots >= 1)) throw new RangeError(`slots must be an integer >= 1 (got ${slots})`);
  }

  /** Runs in progress and runs waiting, for metrics and tests. */
  get stats(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.lanes.interactive.size + this.lanes.batch.size };
  }

  /** Resolves with a release function (idempotent) once the run may start. */
  acquire(model: string, lane: LaneName): Promise<() => void> {
    return new Promise((start) => {
      this.lanes[lane].push(model, start);
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.slots) {
      const start = this.lanes.interactive.shift() ?? this.lanes.batch.shift();
      if (start === undefined) return;
      this.running += 1;
      let released = false;
      start(() => {
        if (released) return;
        released = true;
        this.running -= 1;
        this.pump();
      });
    }
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
      this.queues.set(model, (q = []));
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
