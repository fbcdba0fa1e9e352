import type { QueueHead } from "@shoal/kafka-share";

/**
 * A busy worker's view of its model queues' heads (SHOAL_SHARE_HEADS_MS), read in the background so
 * that no choice waits for the broker: a read (DescribeShareGroupOffsets, then a Fetch) takes
 * 10–30 ms, a fifth of a batch on the dilated GPU profile of bench:dispatch, and awaiting it before
 * each choice left devices idle (busy 0.89 → 0.76 at ρ 2, one run). While reads are wanted, a new
 * one starts `maxAgeMs` after the last ended.
 *
 * The broker's head of a queue is its oldest record not acknowledged, acquired ones included, so a
 * model whose jobs another worker holds (or this one just took) still shows its old head until
 * they are done. A queue found empty, or taken from, is remembered with the head it showed: while
 * reads show that same head and no more waiting than were held, it goes last; more, it goes in the
 * middle (the jobs beyond the held ones are younger than the head says); a new head clears the mark.
 */
export class QueueHeads<K> {
  readonly #read: () => Promise<ReadonlyMap<K, QueueHead>>;
  readonly #maxAgeMs: number;
  readonly #wanted: () => boolean;
  readonly #onError: (err: unknown) => void;
  #view: ReadonlyMap<K, QueueHead> | undefined;
  #readAtMs = Number.NEGATIVE_INFINITY;
  #reading = false;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Queues found empty or taken from, with the head the view showed then. */
  readonly #spent = new Map<K, QueueHead>();

  constructor(opts: {
    read: () => Promise<ReadonlyMap<K, QueueHead>>;
    maxAgeMs: number;
    /** Whether to go on reading every maxAgeMs (the worker is busy). */
    wanted: () => boolean;
    onError: (err: unknown) => void;
  }) {
    this.#read = opts.read;
    this.#maxAgeMs = opts.maxAgeMs;
    this.#wanted = opts.wanted;
    this.#onError = opts.onError;
  }

  /** Starts a read unless one is out or the view is fresh. */
  refresh(now = Date.now()): void {
    if (this.#closed || this.#reading || now - this.#readAtMs <= this.#maxAgeMs) return;
    this.#reading = true;
    const startedAt = now;
    this.#read().then(
      (view) => {
        this.#view = view;
        this.#readAtMs = startedAt;
        for (const [k, was] of this.#spent) if (view.get(k)?.oldestMs !== was.oldestMs) this.#spent.delete(k);
        this.#next();
      },
      (err: unknown) => {
        this.#onError(err);
        this.#next();
      },
    );
  }

  #next(): void {
    this.#reading = false;
    clearTimeout(this.#timer);
    if (this.#closed || !this.#wanted()) return;
    this.#timer = setTimeout(() => this.refresh(), this.#maxAgeMs);
    this.#timer.unref();
  }

  /** 0: waiting, head known (oldest first); 1: waiting, age unknown; 2: empty, or its head is held. */
  #tier(k: K): number {
    const h = this.#view?.get(k);
    if (h === undefined) return 1;
    const spent = this.#spent.get(k);
    if (spent !== undefined) return h.waiting > spent.waiting ? 1 : 2;
    if (h.waiting === 0) return 2;
    return h.oldestMs === undefined ? 1 : 0;
  }

  /** `rotation` ordered oldest head first (a stable sort: the rotation within a tier); as is without a view. */
  order(rotation: readonly K[]): K[] {
    if (this.#view === undefined) return [...rotation];
    const tiers = new Map(rotation.map((k) => [k, this.#tier(k)]));
    const age = (k: K): number => this.#view!.get(k)?.oldestMs ?? 0;
    return [...rotation].sort((a, b) => tiers.get(a)! - tiers.get(b)! || (tiers.get(a) === 0 ? age(a) - age(b) : 0));
  }

  /**
   * This worker took `n` jobs of `k`, or found none (n = 0). Its head stays at the broker until they
   * are done, so reads showing it mean jobs beyond it only when they show more waiting than were
   * held: the `n` taken, or (found none) all it showed.
   */
  taken(k: K, n: number): void {
    const h = this.#view?.get(k);
    if (h !== undefined) this.#spent.set(k, { ...h, waiting: n > 0 ? n : h.waiting });
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}
