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
import { ModelTooLargeError, ResidencyClosedError } from "./errors.ts";
import { chooseVictims, type ResidencyPolicy, type VictimCandidate } from "./eviction-policy.ts";
import { asError, entryInfo, newEntry, type Entry, type Waiter } from "./residency-entry.ts";
import { DecayingCount } from "./traffic.ts";
import {
  DEFAULT_BUSY_VICTIM_WAIT_MS,
  DEFAULT_FAILED_RETRY_MS,
  DEFAULT_THRASH_WINDOW_MS,
  DEFAULT_TRAFFIC,
  type AcquireOptions,
  type Lease,
  type ModelResidencyInfo,
  type ResidencyEvent,
  type ResidencyOptions,
  type ResidencyState,
  type TrafficOptions,
} from "./residency-types.ts";

export type { ResidencyPolicy } from "./eviction-policy.ts";
export {
  DEFAULT_BUSY_VICTIM_WAIT_MS,
  DEFAULT_FAILED_RETRY_MS,
  DEFAULT_THRASH_WINDOW_MS,
  DEFAULT_TRAFFIC,
  type AcquireOptions,
  type Lease,
  type ModelResidencyInfo,
  type ResidencyEvent,
  type ResidencyOptions,
  type ResidencyState,
  type TrafficOptions,
};

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
    if (e?.state !== "resident" || e.stale) return undefined;
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
    if (e?.state === "resident" && !e.stale) {
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
        e = newEntry<R>(model, bytes, this.trafficOpts.halfLifeMs);
        this.entries.set(model, e);
        e.stateBeforeQueue = "new";
      } else {
        // Abandoned after its unload settled, an unloading model is plainly evicted.
        e.stateBeforeQueue = e.state === "unloading" ? "evicted" : e.state;
        // An unloading (or stale) entry keeps its reserved size until the unload settles.
        if (e.state !== "unloading" && !e.stale) {
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

  /**
   * The model's loaded resource is out of date (its model was replaced under the same id): no new
   * lease is granted on it, it is unloaded at once when idle, else as its last lease is released,
   * and the next acquire loads the model again once that unload has settled (so the old and the new
   * resource never hold the budget at once). Leases already granted stay valid until released. A
   * model not resident is left as it is.
   */
  retire(model: string): void {
    const e = this.entries.get(model);
    if (this.closed || e?.state !== "resident" || e.stale) return;
    if (e.inFlight === 0) this.startUnload([e], "replaced", undefined);
    else e.stale = true;
  }

  /** Per model ever seen (see {@link ResidencyState}), sorted by model id. */
  snapshot(): readonly ModelResidencyInfo[] {
    const now = this.opts.clock.now();
    return [...this.entries.values()].sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0)).map((e) => entryInfo(e, this.pinnedBy(e, now), now));
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
    if (e.stale && e.state === "resident") return this.startUnload([e], "replaced", undefined);
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
      if (head.state === "unloading" || head.stale) return; // loads again once its own unload settles
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
  private startUnload(victims: readonly Entry<R>[], reason: "room" | "close" | "replaced", forModel: string | undefined): void {
    const now = this.opts.clock.now();
    const started = victims.map((e) => {
      const resource = e.resource as R;
      e.resource = undefined;
      e.state = "unloading";
      e.stale = false;
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
