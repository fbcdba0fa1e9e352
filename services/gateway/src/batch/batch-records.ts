import { createHash, randomBytes } from "node:crypto";
import { isJsonObject } from "@shoal/common";

/**
 * The records of the Batch API's compacted state topic (`<prefix>.batches`, one partition), keyed
 * `file/<fileId>`, `batch/<batchId>`, `cancel/<batchId>` and `progress/<batchId>`; a tombstone
 * removes a file. Each key has one writer role: the gateway that took an upload writes its file,
 * the one that took a create writes the batch and the one that took a cancel writes the cancel;
 * only the batch's runner writes its progress. So no record is ever read, changed and written back
 * by two gateways at once, and the last record of a key is its whole truth.
 *
 * Values are JSON (`v: 1`): they carry OpenAI's objects nearly field for field.
 */

/** Where one chunk of a file's bytes lies on the files topic. */
export interface ChunkRef {
  readonly partition: number;
  /** Offset, as a decimal string (JSON has no 64-bit integers). */
  readonly offset: string;
  readonly bytes: number;
}

/** An uploaded file (purpose `batch`). Output and error files are not records: they are the batch's progress. */
export interface FileRecord {
  readonly v: 1;
  readonly id: string;
  readonly tenant: string;
  readonly filename: string;
  readonly purpose: "batch";
  readonly bytes: number;
  /** Unix seconds. */
  readonly createdAt: number;
  /** Unix seconds: the files topic's retention deletes the chunks then. */
  readonly expiresAt: number;
  readonly chunks: readonly ChunkRef[];
}

/** A batch as created; never rewritten. */
export interface BatchRecord {
  readonly v: 1;
  readonly id: string;
  readonly tenant: string;
  readonly endpoint: string;
  readonly inputFileId: string;
  readonly completionWindow: "24h";
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly metadata: Readonly<Record<string, string>> | null;
}

/** A cancel asked for. */
export interface CancelRecord {
  readonly v: 1;
  readonly cancellingAt: number;
}

/** One validation error of an input file, as OpenAI reports it in `errors.data`. */
export interface LineError {
  readonly code: string;
  readonly message: string;
  /** 1-based line number; null for the file as a whole. */
  readonly line: number | null;
  readonly param: string | null;
}

/** Statuses the runner writes (`cancelling` is derived from the cancel record). */
export type RunStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelled";

export const TERMINAL: ReadonlySet<RunStatus> = new Set(["failed", "completed", "expired", "cancelled"]);

/**
 * A runner's checkpoint: a whole snapshot, never a delta. Lines `[0, nextLine)` are answered, each
 * exactly once in the `output` and `errors` chunks listed here; chunks written but not (yet)
 * listed are ignored. Any snapshot is a valid place to resume from, so a runner that lost its
 * partition and writes once more late does no harm beyond work done twice.
 */
export interface ProgressRecord {
  readonly v: 1;
  readonly status: RunStatus;
  /** Validation errors (status `failed`). */
  readonly errors: readonly LineError[] | null;
  readonly nextLine: number;
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  readonly output: readonly ChunkRef[];
  readonly errorChunks: readonly ChunkRef[];
  readonly inProgressAt: number | null;
  readonly finalizingAt: number | null;
  readonly completedAt: number | null;
  readonly failedAt: number | null;
  readonly expiredAt: number | null;
  readonly cancelledAt: number | null;
  /** The gateway instance that wrote it (diagnostics). */
  readonly owner: string;
}

/** The progress of a batch no runner has touched yet. */
export function initialProgress(owner: string): ProgressRecord {
  return {
    v: 1,
    status: "validating",
    errors: null,
    nextLine: 0,
    total: 0,
    completed: 0,
    failed: 0,
    output: [],
    errorChunks: [],
    inProgressAt: null,
    finalizingAt: null,
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancelledAt: null,
    owner,
  };
}

export type StateKey =
  | { readonly kind: "file"; readonly id: string }
  | { readonly kind: "batch"; readonly id: string }
  | { readonly kind: "cancel"; readonly id: string }
  | { readonly kind: "progress"; readonly id: string };

const KINDS = new Set(["file", "batch", "cancel", "progress"]);
const ID = /^[A-Za-z0-9_-]{1,64}$/;

export function stateKey(kind: StateKey["kind"], id: string): string {
  return `${kind}/${id}`;
}

/** Parses a record key; undefined for anything else. */
export function parseStateKey(key: string): StateKey | undefined {
  const slash = key.indexOf("/");
  const kind = key.slice(0, slash);
  const id = key.slice(slash + 1);
  if (slash <= 0 || !KINDS.has(kind) || !ID.test(id)) return undefined;
  return { kind: kind as StateKey["kind"], id };
}

export function encodeRecord(record: FileRecord | BatchRecord | CancelRecord | ProgressRecord): Buffer {
  return Buffer.from(JSON.stringify(record), "utf8");
}

/** A record value that is not what its key says. */
export class BatchRecordError extends Error {
  override readonly name = "BatchRecordError";
}

/** Decodes a record value (version 1 only); the fields each reader uses are checked where it reads them. */
export function decodeRecord<T extends { v: 1 }>(key: string, value: Buffer): T {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString("utf8"));
  } catch {
    throw new BatchRecordError(`${key}: not JSON`);
  }
  if (!isJsonObject(parsed) || parsed["v"] !== 1) throw new BatchRecordError(`${key}: not a version 1 record`);
  return parsed as unknown as T;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** 24 random characters of [A-Za-z0-9], as OpenAI's ids have. */
function randomSuffix(): string {
  const bytes = randomBytes(24);
  let out = "";
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return out;
}

export function newFileId(): string {
  return `file-${randomSuffix()}`;
}

export function newBatchId(): string {
  return `batch_${randomSuffix()}`;
}

/**
 * The id of a batch's output or error file: derived from the batch id, so a runner that redoes a
 * batch's last step names the same file.
 */
export function resultFileId(batchId: string, kind: "output" | "error"): string {
  return `file-${createHash("sha256").update(`${batchId}:${kind}`).digest("base64url").replace(/[-_]/g, "").slice(0, 24)}`;
}

/** `batch_req_…`: the id of one answered line (deterministic: the batch and line). */
export function lineRequestId(batchId: string, line: number): string {
  return `batch_req_${createHash("sha256").update(`${batchId}:${line}`).digest("hex").slice(0, 24)}`;
}
