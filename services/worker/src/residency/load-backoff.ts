/**
 * Models whose last load failed on this worker, and how long each waits before its next try.
 *
 * A load that fails (corrupted files, a bad disk, a runtime that refuses the model) usually fails
 * again at once: retried on every job, the worker would take each job of the model, fail the load
 * and give the job back, and take it straight back — on a share group every take costs the job
 * one of its deliveries, so it ran out of them here while a healthy worker could have run it (the
 * chaos campaign's `model-load-fail`: deliveries 1 → 3 within 50 ms). So after a failed load the
 * model waits `initialMs` before the next try, doubling with each failure in a row up to `maxMs`;
 * a load that succeeds forgets it. Meanwhile its jobs go to other workers (jobs/load-give-back.ts).
 */

/** Defaults: a second after the first failure, then 2, 4, 8, 16 s, and at most 30 s. */
export const DEFAULT_LOAD_BACKOFF = { initialMs: 1_000, maxMs: 30_000 } as const;

export interface LoadBackoffOptions {
  /** Wait after the first failed load, ms. */
  readonly initialMs?: number;
  /** Longest wait, however many loads failed in a row, ms. */
  readonly maxMs?: number;
  /** Monotonic milliseconds. */
  readonly now: () => number;
}

/** A model whose last load failed here. */
export interface LoadFailure {
  readonly model: string;
  /** The last load's error. */
  readonly error: Error;
  /** Loads failed in a row. */
  readonly failures: number;
  /** Ms until its next load may start (0: due; the next job or acquire tries it). */
  readonly retryInMs: number;
}

interface Failed {
  readonly error: Error;
  readonly failures: number;
  readonly retryAtMs: number;
}

export class LoadBackoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #now: () => number;
  readonly #failed = new Map<string, Failed>();

  constructor(opts: LoadBackoffOptions) {
    this.#initialMs = opts.initialMs ?? DEFAULT_LOAD_BACKOFF.initialMs;
    this.#maxMs = Math.max(this.#initialMs, opts.maxMs ?? DEFAULT_LOAD_BACKOFF.maxMs);
    this.#now = opts.now;
  }

  /** A load of `model` failed: returns how long it now waits before the next try, ms. */
  failed(model: string, error: Error): number {
    const failures = (this.#failed.get(model)?.failures ?? 0) + 1;
    const waitMs = Math.min(this.#maxMs, this.#initialMs * 2 ** (failures - 1));
    this.#failed.set(model, { error, failures, retryAtMs: this.#now() + waitMs });
    return waitMs;
  }

  /** A load of `model` succeeded (or it left the catalog): it is no longer failing. */
  succeeded(model: string): void {
    this.#failed.delete(model);
  }

  /** The model's failure when its last load failed, else undefined. */
  failure(model: string): LoadFailure | undefined {
    const f = this.#failed.get(model);
    return f === undefined ? undefined : { model, error: f.error, failures: f.failures, retryInMs: Math.max(0, f.retryAtMs - this.#now()) };
  }

  /** Every model whose last load failed. */
  failures(): LoadFailure[] {
    return [...this.#failed.keys()].map((m) => this.failure(m)!);
  }
}
