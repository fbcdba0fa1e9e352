/**
 * Model residency: which models a worker keeps loaded, under a memory budget.
 *
 * Every worker can serve any catalog model. A job takes a {@link Lease} on its model for as long
 * as it runs; the manager loads models on demand (one load per model however many jobs ask, the
 * others wait for it), and when the budget is full unloads idle models chosen by the
 * {@link ResidencyPolicy} to make room.
 *
 * Invariants:
 * - the bytes of resident + loading + unloading models never exceed `budgetBytes` (bytes are
 *   reserved before `load` is called and freed only once `unload` has settled);
 * - a model with a lease outstanding is never unloaded, nor a catalog-pinned model (except by
 *   {@link Residency.close}, once its leases are released);
 * - at most one `load` or `unload` per model is in progress at a time.
 *
 * Loads that cannot get room wait in one FIFO queue (only its head may load, so a big model is not
 * starved by small ones); the head is retried whenever a lease is released or an unload settles.
 * Resident models are never behind that queue: `tryAcquire`/`acquire` of a resident model succeed
 * at once while other models load or wait.
 *
 * Failed-load back-off and traffic decay are read from the clock when needed; the only timer is
 * the cap on a `pinned-by-traffic` load waiting for a busy victim (see `busyVictimWaitMs`).
 */
import type { Clock } from "../batching/clock.ts";
import { ModelTooLargeError, ResidencyClosedError } from "./errors.ts";
import { chooseVictims, type ResidencyPolicy, type VictimCandidate } from "./eviction-policy.ts";
import { DecayingCount } from "./traffic.ts";

export type { ResidencyPolicy } from "./eviction-policy.ts";

/** Tuning of the `pinned-by-traffic` policy. */
export interface TrafficOptions {
  /** Half-life of the decayed request count, ms. */
  readonly halfLifeMs: number;
  /** Decayed count at or above which a model is hot: reported pinned, evicted only as a last resort. */
  readonly hotThreshold: number;
}

/**
 * Defaults tuned on `npm run bench:residency` (Zipf s=1.1 over 20 models, room for 5): cold loads
 * fall as the half-life grows until it spans ~100 requests (0.84 of LRU's at 10 requests per
 * half-life, 0.75 from 100 on, the Belady optimum being ~0.62), so a minute suits anything from a
 * couple of requests per second up, and still forgets a model nobody asks for within minutes.
 * Hot = about one request every 8.7 s sustained (10 = rate × 60 000 ms / ln 2).
 */
export const DEFAULT_TRAFFIC: TrafficOptions = { halfLifeMs: 60_000, hotThreshold: 10 };
export const DEFAULT_THRASH_WINDOW_MS = 30_000;
export const DEFAULT_FAILED_RETRY_MS = 2_000;
export const DEFAULT_BUSY_VICTIM_WAIT_MS = 2_000;

/** What happened, for logs and metrics. `bytes` is the model's reserved size. */
export type ResidencyEvent =
  | { readonly type: "loading"; readonly model: string; readonly bytes: number; readonly queuedMs: number }
  | { readonly type: "loaded"; readonly model: string; readonly bytes: number; readonly coldStartMs: number; readonly waiters: number }
  | { readonly type: "load-failed"; readonly model: string; readonly bytes: number; readonly coldStartMs: number; readonly error: Error }
  /** An unload began: `reason` "room" names the model it makes room for; "close" is {@link Residency.close}. */
  | { readonly type: "evicted"; readonly model: string; readonly bytes: number; readonly reason: "room" | "close"; readonly forModel: string | undefined }
  | { readonly type: "unloaded"; readonly model: string; readonly bytes: number; readonly unloadMs: number }
  /** The unloader rejected; its bytes are freed anyway (the resource is treated as gone). */
  | { readonly type: "unload-failed"; readonly model: string; readonly bytes: number; readonly error: Error }
  /** A model evicted less than `thrashWindowMs` ago is being loaded again. */
  | { readonly type: "thrash"; readonly model: string; readonly sinceEvictedMs: number; readonly thrashEvents: number };

export interface ResidencyOptions<R> {
  readonly budgetBytes: number;
  readonly policy: ResidencyPolicy;
  /**
   * Estimated resident bytes of a model (read when a load is queued). Throwing rejects the acquire
   * with that error; `Infinity` (e.g. for a model not in the catalog) rejects it with ModelTooLargeError.
   */
  sizeOf(model: string): number;
  /** Catalog-pinned models: loaded on demand, never evicted. Optional. */
  isPinned?(model: string): boolean;
  load(model: string): Promise<R>;
  unload(model: string, resource: R): Promise<void>;
  readonly clock: Clock;
  /** `pinned-by-traffic` tuning; default {@link DEFAULT_TRAFFIC}. Counts are kept (and reported) under `lru` too. */
  readonly traffic?: TrafficOptions;
  /** A load of a model evicted less than this long ago counts as a thrash event (default 30 000). */
  readonly thrashWindowMs?: number;
  /** A failed load is not retried for this long: acquires reject at once with the cached error (default 2 000). */
  readonly failedRetryMs?: number;
  /**
   * `pinned-by-traffic` only: how long a load may wait for a busy (loading or leased) model that is
   * a better victim than the idle ones to go idle, before evicting idle ones instead (default 2 000).
   */
  readonly busyVictimWaitMs?: number;
  /** Called synchronously on each transition; exceptions it throws are ignored. */
  readonly onEvent?: (e: ResidencyEvent) => void;
}

/** Use of a resident model. The model stays loaded until every lease on it is released. */
export interface Lease<R> {
  readonly model: string;
  readonly resource: R;
  /** Idempotent. Do not use `resource` after releasing. */
  release(): void;
}

/**
 * - `queued`: wanted, waiting for room (or for its previous unload to settle before loading again);
 * - `loading`, `resident`, `unloading`: bytes reserved;
 * - `failed`: the last load failed (`error`);
 * - `evicted`: was loaded, now is not (unloaded for room, or by close). Models stay listed once
 *   seen, so load/eviction counts survive eviction; a model queued but never loaded whose waiters
 *   all gave up is dropped.
 */
export type ResidencyState = "queued" | "loading" | "resident" | "unloading" | "failed" | "evicted";

export interface ModelResidencyInfo {
  readonly model: string;
  readonly state: ResidencyState;
  /** Reserved bytes while loading/resident/unloading; the last estimate otherwise. */
  readonly bytes: number;
  /** Successful loads. */
  readonly loadCount: number;
  readonly failedLoadCount: number;
  /** Unloads to make room (unloads by close() are not counted). */
  readonly evictionCount: number;
  /** Duration of the last load attempt (clock ms), successful or not; undefined before any. */
  readonly lastColdStartMs: number | undefined;
  /** Clock time of the last lease granted or released; undefined if never used. */
  readonly lastUsedMs: number | undefined;
  /** Leases outstanding. */
  readonly inFlight: number;
  /** Acquires waiting for this model's load. */
  readonly waiting: number;
  /** Never evicted for room: catalog-pinned, or hot under `pinned-by-traffic` (last resort only). */
  readonly pinned: boolean;
  readonly pinnedBy: "catalog" | "traffic" | undefined;
  /** Decayed request count now. */
  readonly traffic: number;
  /** Message of the last load error while `failed`. */
  readonly error: string | undefined;
}

export interface AcquireOptions {
  /** Aborting removes this acquire from the wait (it rejects with the signal's reason); a load already started continues. */
  readonly signal?: AbortSignal;
}

interface Waiter<R> {
  resolve(lease: Lease<R>): void;
  reject(err: unknown): void;
  detach(): void;
}

interface Entry<R> {
  readonly model: string;
  state: ResidencyState;
  /** State to go back to when a queued load is abandoned; "new" drops the entry. */
  stateBeforeQueue: ResidencyState | "new";
  inQueue: boolean;
  bytes: number;
  resource: R | undefined;
  inFlight: number;
  waiters: Waiter<R>[];
  queuedAtMs: number;
  loadStartedAtMs: number;
  loadCount: number;
  failedLoadCount: number;
  evictionCount: number;
  lastColdStartMs: number | undefined;
  lastUsedMs: number | undefined;
  useSeq: number;
  lastEvictedAtMs: number | undefined;
  failedAtMs: number;
  error: Error | undefined;
  readonly traffic: DecayingCount;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export class Residency<R> {
  readonly budgetBytes: number;
  readonly policy: ResidencyPolicy;
  private readonly opts: ResidencyOptions<R>;
  private readonly trafficOpts: TrafficOptions;
  private readonly thrashWindowMs: number;
  private readonly failedRetryMs: number;
  private readonly busyVictimWaitMs: number;
  private cancelBusyTimer: (() => void) | undefined;
  private readonly entries = new Map<string, Entry<R>>();
  /** Models waiting to load, FIFO; only the head may start. */
  private queue: Entry<R>[] = [];
  private used = 0;
  private unloadingBytes = 0;
  private thrash = 0;
  private seq = 0;
  private pumping = false;
  private repump = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private resolveClosed: (() => void) | undefined;

  constructor(opts: ResidencyOptions<R>) {
    if (!(Number.isFinite(opts.budgetBytes) && opts.budgetBytes >= 0)) {
      throw new RangeError(`budgetBytes must be a finite number >= 0 (got ${opts.budgetBytes})`);
    }
    this.opts = opts;
    this.budgetBytes = opts.budgetBytes;
    this.policy = opts.policy;
    this.trafficOpts = opts.traffic ?? DEFAULT_TRAFFIC;
    this.thrashWindowMs = opts.thrashWindowMs ?? DEFAULT_THRASH_WINDOW_MS;
    this.failedRetryMs = opts.failedRetryMs ?? DEFAULT_FAILED_RETRY_MS;
    this.busyVictimWaitMs = opts.busyVictimWaitMs ?? DEFAULT_BUSY_VICTIM_WAIT_MS;
    new DecayingCount(this.trafficOpts.halfLifeMs); // validates
  }

  /** Bytes of resident + loading + unloading models. */
  get usedBytes(): number {
    return this.used;
  }

  /** Loads of models evicted less than `thrashWindowMs` before. */
  get thrashEvents(): number {
    return this.thrash;
  }

  /** Models waiting for room, in queue order. */
  get queuedModels(): readonly string[] {
    return this.queue.map((e) => e.model);
  }

  /** Sync fast path: a lease when the model is resident (counts as a use), else undefined (not counted). */
  tryAcquire(model: string): Lease<R> | undefined {
    if (this.closed) return undefined;
    const e = this.entries.get(model);
    if (e?.state !== "resident") return undefined;
    e.traffic.add(this.opts.clock.now());
    return this.grant(e);
  }

  /**
   * Resident → a lease at once (already counted in-flight when this returns). Otherwise the
   * model's load (single flight: concurrent acquires share it), queued for room when needed.
   * Rejects with {@link ModelTooLargeError} at once when the model can never fit, with the
   * loader's error when the load fails (and, for `failedRetryMs` after, at once with the same
   * error), with {@link ResidencyClosedError} after close, with the signal's reason when aborted.
   */
  acquire(model: string, options: AcquireOptions = {}): Promise<Lease<R>> {
    if (this.closed) return Promise.reject(new ResidencyClosedError(model));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.opts.clock.now();
    let e = this.entries.get(model);
    if (e?.state === "resident") {
      e.traffic.add(now);
      return Promise.resolve(this.grant(e));
    }
    if (e?.state === "failed" && now - e.failedAtMs < this.failedRetryMs) {
      e.traffic.add(now);
      return Promise.reject(e.error);
    }
    const joining = e !== undefined && (e.state === "loading" || e.inQueue);
    if (!joining) {
      let bytes: number;
      try {
        bytes = this.opts.sizeOf(model);
      } catch (err) {
        return Promise.reject(err);
      }
      if (Number.isNaN(bytes) || bytes < 0) {
        return Promise.reject(new RangeError(`sizeOf("${model}") must be a number >= 0 (got ${bytes})`));
      }
      const pinnedBytes = this.pinnedBytesExcept(model);
      if (bytes > this.budgetBytes - pinnedBytes) {
        return Promise.reject(new ModelTooLargeError(model, bytes, this.budgetBytes, bytes > this.budgetBytes ? 0 : pinnedBytes));
      }
      if (e === undefined) {
        e = this.newEntry(model, bytes);
        this.entries.set(model, e);
        e.stateBeforeQueue = "new";
      } else {
        // Abandoned after its unload settled, an unloading model is plainly evicted.
        e.stateBeforeQueue = e.state === "unloading" ? "evicted" : e.state;
        // An unloading entry keeps its reserved size until the unload settles.
        if (e.state !== "unloading") {
          e.bytes = bytes;
          e.state = "queued";
        }
      }
      e.inQueue = true;
      e.queuedAtMs = now;
      this.queue.push(e);
    }
    const entry = e!;
    entry.traffic.add(now);
    const promise = new Promise<Lease<R>>((resolve, reject) => {
      const waiter: Waiter<R> = { resolve, reject, detach: () => {} };
      if (signal) {
        const onAbort = (): void => this.abandon(entry, waiter, signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        waiter.detach = () => signal.removeEventListener("abort", onAbort);
      }
      entry.waiters.push(waiter);
    });
    if (!joining) this.pump();
    return promise;
  }

  /** Per model ever seen (see {@link ResidencyState}), sorted by model id. */
  snapshot(): readonly ModelResidencyInfo[] {
    const now = this.opts.clock.now();
    return [...this.entries.values()]
      .sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0))
      .map((e) => {
        const pinnedBy = this.pinnedBy(e, now);
        return {
          model: e.model,
          state: e.state,
          bytes: e.bytes,
          loadCount: e.loadCount,
          failedLoadCount: e.failedLoadCount,
          evictionCount: e.evictionCount,
          lastColdStartMs: e.lastColdStartMs,
          lastUsedMs: e.lastUsedMs,
          inFlight: e.inFlight,
          waiting: e.waiters.length,
          pinned: pinnedBy !== undefined,
          pinnedBy,
          traffic: e.traffic.valueAt(now),
          error: e.state === "failed" ? e.error?.message : undefined,
        };
      });
  }

  /**
   * Rejects every waiting acquire (and later ones) with {@link ResidencyClosedError}, unloads idle
   * models at once and leased ones as their last lease is released (loads in progress are unloaded
   * when they finish). Resolves once nothing is loaded, loading or unloading, so it waits for
   * outstanding leases: release them (drain jobs) first. Idempotent.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    this.cancelBusyTimer?.();
    this.cancelBusyTimer = undefined;
    this.closing = new Promise<void>((resolve) => (this.resolveClosed = resolve));
    for (const e of this.entries.values()) {
      const waiters = e.waiters;
      e.waiters = [];
      for (const w of waiters) {
        w.detach();
        w.reject(new ResidencyClosedError(e.model));
      }
    }
    for (const e of this.queue) this.dequeued(e);
    this.queue = [];
    this.startUnload(
      [...this.entries.values()].filter((e) => e.state === "resident" && e.inFlight === 0),
      "close",
      undefined,
    );
    this.checkClosed();
    return this.closing;
  }

  // --- internals -------------------------------------------------------------------------------

  private newEntry(model: string, bytes: number): Entry<R> {
    return {
      model,
      state: "queued",
      stateBeforeQueue: "new",
      inQueue: false,
      bytes,
      resource: undefined,
      inFlight: 0,
      waiters: [],
      queuedAtMs: 0,
      loadStartedAtMs: 0,
      loadCount: 0,
      failedLoadCount: 0,
      evictionCount: 0,
      lastColdStartMs: undefined,
      lastUsedMs: undefined,
      useSeq: 0,
      lastEvictedAtMs: undefined,
      failedAtMs: 0,
      error: undefined,
      traffic: new DecayingCount(this.trafficOpts.halfLifeMs),
    };
  }

  private emit(e: ResidencyEvent): void {
    try {
      this.opts.onEvent?.(e);
    } catch {
      // Observers must not break the state machine.
    }
  }

  private isCatalogPinned(model: string): boolean {
    return this.opts.isPinned?.(model) ?? false;
  }

  private pinnedBy(e: Entry<R>, now: number): "catalog" | "traffic" | undefined {
    if (this.isCatalogPinned(e.model)) return "catalog";
    if (this.policy === "pinned-by-traffic" && e.traffic.valueAt(now) >= this.trafficOpts.hotThreshold) return "traffic";
    return undefined;
  }

  /** Bytes of catalog-pinned models loaded or loading, other than `model`: room nobody else can get. */
  private pinnedBytesExcept(model: string): number {
    let sum = 0;
    for (const e of this.entries.values()) {
      if (e.model !== model && (e.state === "resident" || e.state === "loading") && this.isCatalogPinned(e.model)) sum += e.bytes;
    }
    return sum;
  }

  private touch(e: Entry<R>): void {
    e.lastUsedMs = this.opts.clock.now();
    e.useSeq = ++this.seq;
  }

  private grant(e: Entry<R>): Lease<R> {
    e.inFlight += 1;
    this.touch(e);
    const resource = e.resource as R;
    let released = false;
    return {
      model: e.model,
      resource,
      release: () => {
        if (released) return;
        released = true;
        this.released(e);
      },
    };
  }

  private released(e: Entry<R>): void {
    e.inFlight -= 1;
    this.touch(e);
    if (e.inFlight > 0) return;
    if (this.closed) {
      if (e.state === "resident") this.startUnload([e], "close", undefined);
      return;
    }
    if (this.queue.length > 0) this.pump();
  }

  /** An aborted acquire leaves; a queued load nobody waits for any more leaves the queue. */
  private abandon(e: Entry<R>, waiter: Waiter<R>, reason: unknown): void {
    const i = e.waiters.indexOf(waiter);
    if (i < 0) return;
    e.waiters.splice(i, 1);
    waiter.detach();
    waiter.reject(reason);
    if (e.inQueue && e.waiters.length === 0) {
      this.queue = this.queue.filter((q) => q !== e);
      this.dequeued(e);
      this.pump(); // the head may have changed
    }
  }

  /** Undoes the queueing of a load that will not happen. */
  private dequeued(e: Entry<R>): void {
    e.inQueue = false;
    if (e.state !== "queued") return; // still unloading: its unload settles to "evicted"
    if (e.stateBeforeQueue === "new") this.entries.delete(e.model);
    else e.state = e.stateBeforeQueue;
  }

  private pump(): void {
    if (this.pumping) {
      this.repump = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.repump = false;
        this.pumpOnce();
      } while (this.repump);
    } finally {
      this.pumping = false;
    }
  }

  private pumpOnce(): void {
    while (this.queue.length > 0 && !this.closed) {
      const head = this.queue[0]!;
      if (head.state === "unloading") return; // loads again once its own unload settles
      const pinnedBytes = this.pinnedBytesExcept(head.model);
      if (head.bytes > this.budgetBytes - pinnedBytes) {
        // Catalog-pinned models loaded since it was queued leave it no room, ever.
        this.queue.shift();
        const err = new ModelTooLargeError(head.model, head.bytes, this.budgetBytes, pinnedBytes);
        const waiters = head.waiters;
        head.waiters = [];
        this.dequeued(head);
        for (const w of waiters) {
          w.detach();
          w.reject(err);
        }
        continue;
      }
      const free = this.budgetBytes - this.used;
      if (head.bytes <= free) {
        this.queue.shift();
        head.inQueue = false;
        this.startLoad(head);
        continue;
      }
      const shortfall = head.bytes - free - this.unloadingBytes;
      if (shortfall <= 0) return; // unloads in progress will make the room
      const victims = this.victimsFor(head, shortfall);
      if (victims === undefined) return; // wait for a release (or a load to finish)
      this.startUnload(
        victims.map((v) => this.entries.get(v.model)!),
        "room",
        head.model,
      );
      return;
    }
  }

  /**
   * The idle models to unload for `shortfall` bytes, or undefined to wait.
   *
   * Under `pinned-by-traffic` the plan also considers models that are busy (loading, or leased):
   * when the best victims include a busy one (typically the rarely used model just loaded for
   * someone else), the load waits for it to go idle instead of evicting a more valuable idle model;
   * without that, under load every cold model being loaded or served would push out a hot one and
   * the resident set would churn like LRU. The wait is capped at `busyVictimWaitMs` from when the
   * head was queued; after that only idle models are considered.
   */
  private victimsFor(head: Entry<R>, shortfall: number): VictimCandidate[] | undefined {
    const idle = this.candidates();
    const now = this.opts.clock.now();
    const waitedMs = now - head.queuedAtMs;
    if (this.policy === "pinned-by-traffic" && waitedMs < this.busyVictimWaitMs) {
      const busy = this.candidates(true);
      const plan = chooseVictims(this.policy, [...idle, ...busy], shortfall);
      if (plan?.some((v) => busy.includes(v))) {
        this.armBusyTimer(this.busyVictimWaitMs - waitedMs);
        return undefined;
      }
      if (plan !== undefined) return plan;
    }
    return chooseVictims(this.policy, idle, shortfall);
  }

  private armBusyTimer(ms: number): void {
    if (this.cancelBusyTimer) return;
    this.cancelBusyTimer = this.opts.clock.setTimer(
      () => {
        this.cancelBusyTimer = undefined;
        this.pump();
      },
      Math.max(0, ms),
    );
  }

  /** Evictable models (resident, idle, not catalog-pinned); with `busy`, those that will be once idle (loading or leased). */
  private candidates(busy = false): VictimCandidate[] {
    const now = this.opts.clock.now();
    const out: VictimCandidate[] = [];
    for (const e of this.entries.values()) {
      const isBusy = e.state === "loading" || (e.state === "resident" && e.inFlight > 0);
      const isIdle = e.state === "resident" && e.inFlight === 0;
      if (!(busy ? isBusy : isIdle) || this.isCatalogPinned(e.model)) continue;
      const traffic = e.traffic.valueAt(now);
      out.push({ model: e.model, bytes: e.bytes, lastUse: e.useSeq, traffic, hot: traffic >= this.trafficOpts.hotThreshold });
    }
    return out;
  }

  private startLoad(e: Entry<R>): void {
    const now = this.opts.clock.now();
    e.state = "loading";
    e.error = undefined;
    e.loadStartedAtMs = now;
    this.used += e.bytes;
    if (e.lastEvictedAtMs !== undefined && now - e.lastEvictedAtMs < this.thrashWindowMs) {
      this.thrash += 1;
      this.emit({ type: "thrash", model: e.model, sinceEvictedMs: now - e.lastEvictedAtMs, thrashEvents: this.thrash });
    }
    this.emit({ type: "loading", model: e.model, bytes: e.bytes, queuedMs: now - e.queuedAtMs });
    let loading: Promise<R>;
    try {
      loading = Promise.resolve(this.opts.load(e.model));
    } catch (err) {
      loading = Promise.reject(err);
    }
    loading.then(
      (resource) => this.loaded(e, resource),
      (err: unknown) => this.loadFailed(e, asError(err)),
    );
  }

  private loaded(e: Entry<R>, resource: R): void {
    const coldStartMs = this.opts.clock.now() - e.loadStartedAtMs;
    e.loadCount += 1;
    e.lastColdStartMs = coldStartMs;
    e.state = "resident";
    e.resource = resource;
    const waiters = e.waiters;
    e.waiters = [];
    // Leases are taken before anything else runs (the event's observer included), so nothing can
    // evict the model before its waiters get it.
    const granted = this.closed ? [] : waiters.map((w) => ({ w, lease: this.grant(e) }));
    this.emit({ type: "loaded", model: e.model, bytes: e.bytes, coldStartMs, waiters: waiters.length });
    // Granted leases stand even if the observer closed the manager: the model unloads on their release.
    for (const { w, lease } of granted) {
      w.detach();
      w.resolve(lease);
    }
    if (this.closed) {
      if (e.inFlight === 0) this.startUnload([e], "close", undefined);
      return;
    }
    if (waiters.length === 0 && this.queue.length > 0) this.pump(); // loaded for nobody (all aborted): evictable now
  }

  private loadFailed(e: Entry<R>, error: Error): void {
    const now = this.opts.clock.now();
    e.lastColdStartMs = now - e.loadStartedAtMs;
    e.failedLoadCount += 1;
    e.state = "failed";
    e.error = error;
    e.failedAtMs = now;
    this.used -= e.bytes;
    const waiters = e.waiters;
    e.waiters = [];
    this.emit({ type: "load-failed", model: e.model, bytes: e.bytes, coldStartMs: e.lastColdStartMs, error });
    for (const w of waiters) {
      w.detach();
      w.reject(error);
    }
    this.pump();
    this.checkClosed();
  }

  /**
   * Unloads models (idle, resident). All of them change state before any observer or unloader
   * runs, so a re-entrant acquire cannot lease a victim chosen in the same plan.
   */
  private startUnload(victims: readonly Entry<R>[], reason: "room" | "close", forModel: string | undefined): void {
    const now = this.opts.clock.now();
    const started = victims.map((e) => {
      const resource = e.resource as R;
      e.resource = undefined;
      e.state = "unloading";
      this.unloadingBytes += e.bytes;
      if (reason === "room") {
        e.evictionCount += 1;
        e.lastEvictedAtMs = now;
      }
      return { e, resource };
    });
    for (const { e, resource } of started) {
      this.emit({ type: "evicted", model: e.model, bytes: e.bytes, reason, forModel });
      let unloading: Promise<void>;
      try {
        unloading = Promise.resolve(this.opts.unload(e.model, resource));
      } catch (err) {
        unloading = Promise.reject(err);
      }
      unloading.then(
        () => this.unloaded(e, now, undefined),
        (err: unknown) => this.unloaded(e, now, asError(err)),
      );
    }
  }

  private unloaded(e: Entry<R>, startedAtMs: number, error: Error | undefined): void {
    this.used -= e.bytes;
    this.unloadingBytes -= e.bytes;
    e.state = e.inQueue ? "queued" : "evicted";
    if (error) this.emit({ type: "unload-failed", model: e.model, bytes: e.bytes, error });
    else this.emit({ type: "unloaded", model: e.model, bytes: e.bytes, unloadMs: this.opts.clock.now() - startedAtMs });
    if (e.inQueue && !this.closed) {
      // Its size may have been re-estimated while the unload ran.
      try {
        const bytes = this.opts.sizeOf(e.model);
        if (!Number.isNaN(bytes) && bytes >= 0) e.bytes = bytes; // Infinity: rejected as too large by the pump
      } catch {
        // keep the old estimate
      }
    }
    this.pump();
    this.checkClosed();
  }

  private checkClosed(): void {
    if (!this.closed || !this.resolveClosed) return;
    for (const e of this.entries.values()) {
      if (e.state === "loading" || e.state === "resident" || e.state === "unloading") return;
    }
    this.resolveClosed();
    this.resolveClosed = undefined;
  }
}
