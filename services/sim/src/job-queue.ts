/**
 * A queue of jobs as a worker sees its pulled work: one FIFO per model (the worker batches each
 * model apart), served oldest head first. Used both as the one shared queue and as each device's
 * private queue in routed modes, so both sides batch by the same rules.
 */
import type { TraceJob } from "./trace.ts";

/** Batch close rules of the worker's token-budget policy (services/worker/src/batching/batcher.ts). */
export interface BatchLimits {
  readonly maxBatchTokens: number;
  readonly maxBatchItems: number;
}

/** FIFO per model with O(1) push / take at the head. */
export class JobQueue {
  private readonly fifos: TraceJob[][] = [];
  private readonly heads: number[] = [];
  private jobCount = 0;
  private tokenCount = 0;

  /** Jobs waiting. */
  get jobs(): number {
    return this.jobCount;
  }

  /** Σ tokens of the jobs waiting. */
  get tokens(): number {
    return this.tokenCount;
  }

  push(job: TraceJob): void {
    while (this.fifos.length <= job.model) {
      this.fifos.push([]);
      this.heads.push(0);
    }
    this.fifos[job.model]!.push(job);
    this.jobCount += 1;
    this.tokenCount += job.totalTokens;
  }

  /** Arrival of the oldest waiting job (Infinity when empty). */
  oldestArrivalMs(): number {
    let oldest = Infinity;
    for (let m = 0; m < this.fifos.length; m++) {
      const head = this.fifos[m]![this.heads[m]!];
      if (head !== undefined && head.arrivalMs < oldest) oldest = head.arrivalMs;
    }
    return oldest;
  }

  /**
   * Whether the batch {@link take} would form now is full (token budget or item cap reached): a
   * full batch starts at once whatever the max wait.
   */
  wouldFill(limits: BatchLimits): boolean {
    const m = this.oldestModel();
    if (m === undefined) return false;
    let tokens = 0;
    let items = 0;
    const fifo = this.fifos[m]!;
    for (let i = this.heads[m]!; i < fifo.length; i++) {
      tokens += fifo[i]!.totalTokens;
      items += fifo[i]!.tokens.length;
      if (tokens >= limits.maxBatchTokens || items >= limits.maxBatchItems) return true;
    }
    return false;
  }

  /**
   * Takes the next batch: the model of the oldest waiting job, then its jobs in arrival order while
   * they fit the token budget and item cap (the first always goes, however large). Whole jobs:
   * the unit a worker pulls is a job record.
   */
  take(limits: BatchLimits, model?: number): TraceJob[] {
    const m = model ?? this.oldestModel();
    if (m === undefined || this.waiting(m) === 0) return [];
    const fifo = this.fifos[m]!;
    const taken: TraceJob[] = [];
    let tokens = 0;
    let items = 0;
    let i = this.heads[m]!;
    for (; i < fifo.length; i++) {
      const job = fifo[i]!;
      if (taken.length > 0 && (tokens + job.totalTokens > limits.maxBatchTokens || items + job.tokens.length > limits.maxBatchItems)) break;
      taken.push(job);
      tokens += job.totalTokens;
      items += job.tokens.length;
    }
    this.heads[m] = i;
    // Compact now and then so a long run does not keep every job it ever queued.
    if (i > 1024 && i * 2 > fifo.length) {
      this.fifos[m] = fifo.slice(i);
      this.heads[m] = 0;
    }
    this.jobCount -= taken.length;
    this.tokenCount -= tokens;
    return taken;
  }

  /**
   * Takes the oldest waiting jobs whatever their model, in arrival order, while their tokens fit
   * `maxTokens` (the first always goes): what one fetch of a mixed topic hands a worker.
   */
  takeOldest(maxTokens: number): TraceJob[] {
    const taken: TraceJob[] = [];
    let tokens = 0;
    for (;;) {
      const m = this.oldestModel();
      if (m === undefined) break;
      const job = this.fifos[m]![this.heads[m]!]!;
      if (taken.length > 0 && tokens + job.totalTokens > maxTokens) break;
      taken.push(job);
      tokens += job.totalTokens;
      this.heads[m] = this.heads[m]! + 1;
    }
    this.jobCount -= taken.length;
    this.tokenCount -= tokens;
    return taken;
  }

  /** Arrival of `model`'s oldest waiting job (Infinity when none waits). */
  headArrivalMs(model: number): number {
    const fifo = this.fifos[model];
    return fifo?.[this.heads[model]!]?.arrivalMs ?? Infinity;
  }

  /** Jobs of `model` waiting. */
  waiting(model: number): number {
    const fifo = this.fifos[model];
    return fifo === undefined ? 0 : fifo.length - this.heads[model]!;
  }

  /** Model ids the queue has held jobs of: 0 to this, exclusive (each may have none waiting now). */
  get models(): number {
    return this.fifos.length;
  }

  /** Model of the oldest waiting job (ids follow arrival order, so simultaneous fan-out calls keep theirs). */
  private oldestModel(): number | undefined {
    let best: number | undefined;
    let oldest = Infinity;
    for (let m = 0; m < this.fifos.length; m++) {
      const head = this.fifos[m]![this.heads[m]!];
      if (head !== undefined && head.id < oldest) {
        oldest = head.id;
        best = m;
      }
    }
    return best;
  }
}
