import { resultFileId } from "./batch-records.ts";
import { type BatchView, type FileView, resultFilesOf, statusOf } from "./batch-state.ts";

/** OpenAI's file object. */
export function fileObject(f: FileView): Record<string, unknown> {
  return {
    id: f.id,
    object: "file",
    bytes: f.bytes,
    created_at: f.createdAt,
    expires_at: f.expiresAt,
    filename: f.filename,
    purpose: f.purpose,
    status: "processed",
    status_details: null,
  };
}

/** OpenAI's batch object. */
export function batchObject(v: BatchView): Record<string, unknown> {
  const b = v.batch;
  const p = v.progress;
  const files = new Set(resultFilesOf(v).map((f) => f.id));
  const output = resultFileId(b.id, "output");
  const errorFile = resultFileId(b.id, "error");
  const errors = p?.errors ?? null;
  return {
    id: b.id,
    object: "batch",
    endpoint: b.endpoint,
    errors: errors === null ? null : { object: "list", data: errors.map((e) => ({ code: e.code, message: e.message, param: e.param, line: e.line })) },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: statusOf(v),
    output_file_id: files.has(output) ? output : null,
    error_file_id: files.has(errorFile) ? errorFile : null,
    created_at: b.createdAt,
    in_progress_at: p?.inProgressAt ?? null,
    expires_at: b.expiresAt,
    finalizing_at: p?.finalizingAt ?? null,
    completed_at: p?.completedAt ?? null,
    failed_at: p?.failedAt ?? null,
    expired_at: p?.expiredAt ?? null,
    cancelling_at: v.cancel?.cancellingAt ?? null,
    cancelled_at: p?.cancelledAt ?? null,
    request_counts: { total: p?.total ?? 0, completed: p?.completed ?? 0, failed: p?.failed ?? 0 },
    metadata: b.metadata,
  };
}

/**
 * One page of a list as OpenAI cursors it: the items after `after` (an id of the list), at most
 * `limit`; `has_more` says whether a next page exists.
 */
export function page<T extends { id: string }>(items: readonly T[], after: string | undefined, limit: number): { data: T[]; hasMore: boolean } {
  const start = after === undefined ? 0 : items.findIndex((i) => i.id === after) + 1;
  // An unknown cursor (another tenant's, or gone) starts nowhere: an empty page, never someone else's.
  if (after !== undefined && start === 0) return { data: [], hasMore: false };
  const data = items.slice(start, start + limit);
  return { data, hasMore: start + limit < items.length };
}
