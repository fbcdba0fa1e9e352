import {
  type BatchRecord,
  type CancelRecord,
  type ChunkRef,
  decodeRecord,
  type FileRecord,
  parseStateKey,
  type ProgressRecord,
  resultFileId,
  TERMINAL,
} from "./batch-records.ts";

/** OpenAI's batch statuses. */
export type BatchStatus = ProgressRecord["status"] | "cancelling";

/** A batch as its records add up: creation, cancel (if any), the runner's last snapshot (if any). */
export interface BatchView {
  readonly batch: BatchRecord;
  readonly cancel: CancelRecord | undefined;
  readonly progress: ProgressRecord | undefined;
  /** Log offset of the batch record: the order of creation. */
  readonly order: bigint;
}

/** A file a tenant may read: an upload, or a finished batch's output or error file. */
export interface FileView {
  readonly id: string;
  readonly tenant: string;
  readonly filename: string;
  readonly purpose: "batch" | "batch_output";
  readonly bytes: number;
  readonly createdAt: number;
  readonly expiresAt: number | null;
  readonly chunks: readonly ChunkRef[];
}

/** Marker value of a deleted output or error file (they have no record of their own to tombstone). */
export interface DeletedMarker {
  readonly v: 1;
  readonly deleted: true;
}

/** The status a batch shows: the runner's when final, else `cancelling` once asked. */
export function statusOf(view: BatchView): BatchStatus {
  const p = view.progress;
  if (p !== undefined && TERMINAL.has(p.status)) return p.status;
  if (view.cancel !== undefined) return "cancelling";
  return p?.status ?? "validating";
}

export function isOpen(view: BatchView): boolean {
  const p = view.progress;
  return p === undefined || !TERMINAL.has(p.status);
}

function sum(chunks: readonly ChunkRef[]): number {
  return chunks.reduce((n, c) => n + c.bytes, 0);
}

/**
 * The Batch API's state as the compacted topic's records add up, applied in log order (the last
 * record of a key wins, a tombstone removes). Pure: the Kafka follower feeds it; every gateway
 * holds the same.
 */
export class BatchState {
  private readonly files = new Map<string, FileRecord>();
  private readonly batches = new Map<string, { batch: BatchRecord; order: bigint }>();
  private readonly cancels = new Map<string, CancelRecord>();
  private readonly progress = new Map<string, ProgressRecord>();
  /** Output and error files deleted by their owner. */
  private readonly deleted = new Set<string>();
  /** Output and error file id → batch id. */
  private readonly resultFiles = new Map<string, string>();

  /** Applies one record; `value` null is a tombstone. Returns the batch id it concerns, if any. @throws BatchRecordError */
  apply(key: string, value: Buffer | null, offset: bigint): string | undefined {
    const k = parseStateKey(key);
    if (k === undefined) return undefined;
    switch (k.kind) {
      case "file": {
        if (value === null) this.files.delete(k.id);
        else {
          const r = decodeRecord<FileRecord | DeletedMarker>(key, value);
          if ("deleted" in r) this.deleted.add(k.id);
          else this.files.set(k.id, r);
        }
        return undefined;
      }
      case "batch": {
        if (value === null) {
          this.batches.delete(k.id);
          return k.id;
        }
        const batch = decodeRecord<BatchRecord>(key, value);
        this.batches.set(k.id, { batch, order: offset });
        this.resultFiles.set(resultFileId(k.id, "output"), k.id);
        this.resultFiles.set(resultFileId(k.id, "error"), k.id);
        return k.id;
      }
      case "cancel":
        if (value === null) this.cancels.delete(k.id);
        else this.cancels.set(k.id, decodeRecord<CancelRecord>(key, value));
        return k.id;
      case "progress":
        if (value === null) this.progress.delete(k.id);
        else this.progress.set(k.id, decodeRecord<ProgressRecord>(key, value));
        return k.id;
    }
  }

  /** A batch whoever owns it (the runners' view); undefined if unknown. */
  batch(id: string): BatchView | undefined {
    const b = this.batches.get(id);
    if (b === undefined) return undefined;
    return { batch: b.batch, cancel: this.cancels.get(id), progress: this.progress.get(id), order: b.order };
  }

  /** Batch `id` if `tenant` owns it. */
  batchOf(tenant: string, id: string): BatchView | undefined {
    const v = this.batch(id);
    return v?.batch.tenant === tenant ? v : undefined;
  }

  /** Every batch's id (the runners scan them after a rebalance). */
  batchIds(): string[] {
    return [...this.batches.keys()];
  }

  /** The tenant's batches, newest first. */
  batchesOf(tenant: string): BatchView[] {
    const out: BatchView[] = [];
    for (const id of this.batches.keys()) {
      const v = this.batchOf(tenant, id);
      if (v !== undefined) out.push(v);
    }
    return out.sort((a, b) => (a.order < b.order ? 1 : a.order > b.order ? -1 : 0));
  }

  /** How many of the tenant's batches are not final. */
  openBatchesOf(tenant: string): number {
    return this.batchesOf(tenant).filter(isOpen).length;
  }

  /** An uploaded file whoever owns it (the runner reads a batch's input). */
  upload(id: string): FileRecord | undefined {
    return this.files.get(id);
  }

  /** File `id` if `tenant` may see it, not expired at `nowS`. */
  fileOf(tenant: string, id: string, nowS: number): FileView | undefined {
    const f = this.files.get(id);
    if (f !== undefined) return f.tenant === tenant && f.expiresAt > nowS ? { ...f } : undefined;
    const batchId = this.resultFiles.get(id);
    if (batchId === undefined || this.deleted.has(id)) return undefined;
    const v = this.batchOf(tenant, batchId);
    if (v === undefined) return undefined;
    return resultFilesOf(v).find((r) => r.id === id);
  }

  /** The tenant's files (uploads and result files), newest first. */
  filesOf(tenant: string, nowS: number): FileView[] {
    const out: FileView[] = [];
    for (const f of this.files.values()) if (f.tenant === tenant && f.expiresAt > nowS) out.push({ ...f });
    for (const v of this.batchesOf(tenant)) for (const r of resultFilesOf(v)) if (!this.deleted.has(r.id)) out.push(r);
    return out.sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
  }
}

/** A finished batch's output and error files (only those with lines in them), as OpenAI lists them. */
export function resultFilesOf(v: BatchView): FileView[] {
  const p = v.progress;
  if (p === undefined || !TERMINAL.has(p.status)) return [];
  const at = p.completedAt ?? p.cancelledAt ?? p.expiredAt ?? p.failedAt ?? v.batch.createdAt;
  const out: FileView[] = [];
  const add = (kind: "output" | "error", chunks: readonly ChunkRef[]): void => {
    if (chunks.length === 0) return;
    out.push({
      id: resultFileId(v.batch.id, kind),
      tenant: v.batch.tenant,
      filename: `${v.batch.id}_${kind}.jsonl`,
      purpose: "batch_output",
      bytes: sum(chunks),
      createdAt: at,
      expiresAt: null,
      chunks,
    });
  };
  add("output", p.output);
  add("error", p.errorChunks);
  return out;
}
