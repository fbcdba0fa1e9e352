/**
 * A byte-bounded LRU of finished results with the computations in flight beside it: a key is a
 * hit (its value is here), a join (someone is computing it: wait for theirs) or owned (the caller
 * computes it and must settle or abandon it). The LRU is lru-cache's (`maxSize` +
 * `sizeCalculation`); what this adds is the in-flight table and its rule that a waiter is never
 * left without an answer: an abandoned flight resolves its waiters with `undefined`, telling them
 * to look again (and compute themselves when nobody else does).
 */
import { LRUCache } from "lru-cache";

/** What {@link FlightCache.lookup} found for a key. */
export type Lookup<V> =
  | { readonly kind: "hit"; readonly value: V }
  /** Someone computes it: `result` resolves with their value, or `undefined` when they gave up (look again). Never rejects. */
  | { readonly kind: "join"; readonly result: Promise<V | undefined> }
  /** Nobody does: the caller computes it and must call `settle` or `abandon` exactly once. */
  | { readonly kind: "own"; readonly flight: Flight<V> };

/** A computation owned by one caller; later calls after the first are ignored. */
export interface Flight<V> {
  /** Stores the value and hands it to every waiter. */
  settle(value: V): void;
  /** The owner failed or left: waiters get `undefined` and look again. */
  abandon(): void;
}

/** Told of each lookup's outcome and of each entry evicted to make room (for metrics). */
export interface FlightCacheEvents {
  readonly hit?: () => void;
  readonly miss?: () => void;
  readonly join?: () => void;
  readonly evict?: () => void;
}

export interface FlightCacheOptions<V> {
  /** Most bytes the stored entries may take, as `sizeOf` counts them; at least 1. */
  readonly maxBytes: number;
  /** An entry's bytes (its key's included): what `maxBytes` bounds. */
  readonly sizeOf: (key: string, value: V) => number;
  readonly events?: FlightCacheEvents;
}

interface Pending<V> {
  readonly result: Promise<V | undefined>;
  readonly resolve: (value: V | undefined) => void;
}

/** See the module comment. `group` separates flights (not stored values): a lookup joins only flights of its own group. */
export class FlightCache<V extends {}> {
  private readonly lru: LRUCache<string, V>;
  private readonly flights = new Map<string, Map<string, Pending<V>>>();
  private readonly events: FlightCacheEvents;

  constructor(opts: FlightCacheOptions<V>) {
    if (!(opts.maxBytes >= 1)) throw new RangeError(`maxBytes must be at least 1, got ${opts.maxBytes}`);
    this.events = opts.events ?? {};
    const evict = this.events.evict;
    this.lru = new LRUCache<string, V>({
      maxSize: opts.maxBytes,
      // lru-cache wants a positive integer.
      sizeCalculation: (value, key) => Math.max(1, Math.ceil(opts.sizeOf(key, value))),
      ...(evict === undefined ? {} : { dispose: (_v: V, _k: string, reason: LRUCache.DisposeReason) => reason === "evict" && evict() }),
    });
  }

  /** Bytes the stored entries take now. */
  get bytes(): number {
    return this.lru.calculatedSize;
  }

  /** Entries stored now. */
  get entries(): number {
    return this.lru.size;
  }

  /** Computations in flight now, over all groups. */
  get inFlight(): number {
    let n = 0;
    for (const g of this.flights.values()) n += g.size;
    return n;
  }

  /** The stored value, else the flight to join, else a new flight the caller owns (see {@link Lookup}). */
  lookup(key: string, group = ""): Lookup<V> {
    const value = this.lru.get(key);
    if (value !== undefined) {
      this.events.hit?.();
      return { kind: "hit", value };
    }
    let flights = this.flights.get(group);
    const pending = flights?.get(key);
    if (pending !== undefined) {
      this.events.join?.();
      return { kind: "join", result: pending.result };
    }
    this.events.miss?.();
    if (flights === undefined) {
      flights = new Map();
      this.flights.set(group, flights);
    }
    let resolve!: (value: V | undefined) => void;
    const result = new Promise<V | undefined>((r) => (resolve = r));
    const own: Pending<V> = { result, resolve };
    flights.set(key, own);
    let done = false;
    const end = (value: V | undefined): void => {
      if (done) return;
      done = true;
      const g = this.flights.get(group);
      if (g?.get(key) === own) {
        g.delete(key);
        if (g.size === 0) this.flights.delete(group);
      }
      // Stored before the waiters hear of it, so that a waiter's next lookup already hits.
      if (value !== undefined) this.lru.set(key, value);
      resolve(value);
    };
    return { kind: "own", flight: { settle: (v) => end(v), abandon: () => end(undefined) } };
  }

  /** Drops every stored entry (flights in progress are kept). */
  clear(): void {
    this.lru.clear();
  }
}
