/**
 * One model's entry in the residency's books (residency.ts): its state, reserved bytes, leases,
 * waiters and counters.
 */
import type { Lease, ModelResidencyInfo, ResidencyState } from "./residency-types.ts";
import { DecayingCount } from "./traffic.ts";

export interface Waiter<R> {
  resolve(lease: Lease<R>): void;
  reject(err: unknown): void;
  detach(): void;
}

export interface Entry<R> {
  readonly model: string;
  state: ResidencyState;
  /** State to go back to when a queued load is abandoned; "new" drops the entry. */
  stateBeforeQueue: ResidencyState | "new";
  inQueue: boolean;
  bytes: number;
  resource: R | undefined;
  inFlight: number;
  /** Resident but out of date (see {@link Residency.retire}): no new leases; unloaded once the last is released. */
  stale: boolean;
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

export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** A model seen for the first time, queued to load. */
export function newEntry<R>(model: string, bytes: number, halfLifeMs: number): Entry<R> {
  return {
    model,
    state: "queued",
    stateBeforeQueue: "new",
    inQueue: false,
    bytes,
    resource: undefined,
    inFlight: 0,
    stale: false,
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
    traffic: new DecayingCount(halfLifeMs),
  };
}

/** What `Residency.snapshot` reports of one entry. */
export function entryInfo<R>(e: Entry<R>, pinnedBy: "catalog" | "traffic" | undefined, now: number): ModelResidencyInfo {
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
}
