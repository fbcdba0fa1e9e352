import { decodeStatus, RecordDecodeError, SIGNATURE_HEADER, statusSignedBytes, type RecordSigner } from "@shoal/common";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";

/** Slack for clock differences between a worker and this gateway. */
const CLOCK_SLACK_MS = 2_000;
/** Longest status interval honoured: a record claiming a longer one still expires after 3 of these. */
export const MAX_STATUS_INTERVAL_MS = 60_000;

/** Why a status record was not taken. */
export type StatusRejection = "signature" | "malformed" | "capacity";

/** What became of one status record. */
export type StatusOutcome = "stored" | "removed" | "stale" | StatusRejection;

/** The Kafka record, as much of it as the table reads. */
export interface StatusRecord {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers?: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
}

interface Entry {
  readonly status: WorkerStatus;
  /** Local clock: when this entry stops describing a live worker unless refreshed. */
  readonly expiresAtMs: number;
}

/**
 * When a status received at `nowMs` stops being fresh: three of its intervals (at most
 * `MAX_STATUS_INTERVAL_MS` each) after it was written, plus clock slack — and never later than
 * that after it arrived, so a record dated in the future expires like any other.
 */
export function expiryOf(status: WorkerStatus, nowMs: number): number {
  const interval = Math.min(status.intervalMs > 0 ? status.intervalMs : 2_000, MAX_STATUS_INTERVAL_MS);
  return Math.min(Number(status.updatedUnixMs), nowMs) + 3 * interval + CLOCK_SLACK_MS;
}

/**
 * The latest status of each worker, bounded and expiring (issue #19: a client that can produce to
 * the status topic must not grow a gateway's memory nor list workers that do not exist). With
 * cluster keys only records signed over their key and value are taken; the key must be the
 * status's worker id; an entry not refreshed in time is dropped; past `maxWorkers` live entries a
 * new worker id is refused until one expires or leaves (known workers keep refreshing theirs).
 */
export class StatusTable {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly maxWorkers: number,
    private readonly signer?: RecordSigner,
  ) {}

  /** Entries held (live or not yet swept), for the memory gauge. */
  get size(): number {
    return this.entries.size;
  }

  accept(record: StatusRecord, nowMs: number): StatusOutcome {
    const key = record.key?.toString("utf8") ?? "";
    const value = record.value !== null && record.value.length > 0 ? record.value : null;
    if (this.signer?.enabled && !this.signer.verify("status", statusSignedBytes(key, value), record.headers?.[SIGNATURE_HEADER])) return "signature";
    if (value === null) {
      // A tombstone: the worker left cleanly.
      this.entries.delete(key);
      return "removed";
    }
    let status: WorkerStatus;
    try {
      status = decodeStatus(value);
    } catch (err) {
      if (!(err instanceof RecordDecodeError)) throw err;
      return "malformed";
    }
    if (status.workerId !== key || key === "") return "malformed";
    const expiresAtMs = expiryOf(status, nowMs);
    const known = this.entries.get(key);
    if (expiresAtMs <= nowMs) return "stale";
    if (known !== undefined && known.expiresAtMs > nowMs && known.status.updatedUnixMs > status.updatedUnixMs) return "stale";
    if (known === undefined && this.entries.size >= this.maxWorkers) {
      this.sweep(nowMs);
      if (this.entries.size >= this.maxWorkers) return "capacity";
    }
    this.entries.set(key, { status, expiresAtMs });
    return "stored";
  }

  /** Drops the entries that expired by `nowMs`. */
  sweep(nowMs: number): void {
    for (const [id, e] of this.entries) if (e.expiresAtMs <= nowMs) this.entries.delete(id);
  }

  /** The live workers by id. */
  workers(nowMs: number): WorkerStatus[] {
    const live: WorkerStatus[] = [];
    for (const e of this.entries.values()) if (e.expiresAtMs > nowMs) live.push(e.status);
    return live.sort((a, b) => a.workerId.localeCompare(b.workerId));
  }
}
