/**
 * The public shapes of model residency (residency.ts): options, leases, events and the snapshot.
 */
import type { Clock } from "../batching/clock.ts";
import type { ResidencyPolicy } from "./eviction-policy.ts";

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
  /**
   * An unload began: `reason` "room" names the model it makes room for; "close" is Residency.close;
   * "replaced" is Residency.retire (the model was replaced under its id).
   */
  | {
      readonly type: "evicted";
      readonly model: string;
      readonly bytes: number;
      readonly reason: "room" | "close" | "replaced";
      readonly forModel: string | undefined;
    }
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
