import assert from "node:assert/strict";
import { test } from "node:test";
import { batchObject, fileObject, page } from "./batch-objects.ts";
import { type BatchRecord, encodeRecord, type FileRecord, initialProgress, type ProgressRecord, resultFileId, stateKey } from "./batch-records.ts";
import { BatchState } from "./batch-state.ts";

const NOW = 1_700_000_000;
const file = (id: string, tenant: string, createdAt = NOW): FileRecord => ({
  v: 1,
  id,
  tenant,
  filename: "in.jsonl",
  purpose: "batch",
  bytes: 10,
  createdAt,
  expiresAt: createdAt + 3600,
  chunks: [{ partition: 0, offset: "3", bytes: 10 }],
});
const batch = (id: string, tenant: string): BatchRecord => ({
  v: 1,
  id,
  tenant,
  endpoint: "/v1/embeddings",
  inputFileId: "file-a",
  completionWindow: "24h",
  createdAt: NOW,
  expiresAt: NOW + 86_400,
  metadata: { k: "v" },
});

function stateOf(records: Array<[string, unknown]>): BatchState {
  const s = new BatchState();
  for (const [i, [key, value]] of records.entries()) s.apply(key, value === null ? null : Buffer.from(JSON.stringify(value)), BigInt(i));
  return s;
}

test("records add up per tenant: another tenant's file and batch do not exist for it, lists are newest first", () => {
  const s = stateOf([
    [stateKey("file", "file-a"), file("file-a", "acme")],
    [stateKey("file", "file-b"), file("file-b", "rival", NOW + 5)],
    [stateKey("batch", "batch_1"), batch("batch_1", "acme")],
    [stateKey("batch", "batch_2"), batch("batch_2", "acme")],
    [stateKey("batch", "batch_3"), batch("batch_3", "rival")],
    ["garbage-key", { v: 1 }],
  ]);
  assert.equal(s.fileOf("acme", "file-a", NOW)?.id, "file-a");
  assert.equal(s.fileOf("rival", "file-a", NOW), undefined);
  assert.equal(s.fileOf("acme", "file-a", NOW + 3600), undefined, "expired with its chunks");
  assert.equal(s.batchOf("rival", "batch_1"), undefined);
  assert.deepEqual(
    s.batchesOf("acme").map((v) => v.batch.id),
    ["batch_2", "batch_1"],
  );
  assert.equal(s.openBatchesOf("acme"), 2);
  assert.deepEqual(
    s.filesOf("rival", NOW).map((f) => f.id),
    ["file-b"],
  );
  // A tombstone removes an upload.
  s.apply(stateKey("file", "file-a"), null, 10n);
  assert.equal(s.fileOf("acme", "file-a", NOW), undefined);
});

test("batch object: validating, then cancelling once asked, then the runner's final status with its result files", () => {
  const s = stateOf([[stateKey("batch", "batch_1"), batch("batch_1", "acme")]]);
  const view = () => s.batchOf("acme", "batch_1")!;
  assert.equal(batchObject(view())["status"], "validating");
  s.apply(stateKey("cancel", "batch_1"), encodeRecord({ v: 1, cancellingAt: NOW + 1 }), 1n);
  assert.deepEqual([batchObject(view())["status"], batchObject(view())["cancelling_at"]], ["cancelling", NOW + 1]);
  const done: ProgressRecord = {
    ...initialProgress("g1"),
    status: "cancelled",
    total: 5,
    completed: 2,
    nextLine: 2,
    output: [{ partition: 1, offset: "7", bytes: 100 }],
    inProgressAt: NOW,
    cancelledAt: NOW + 2,
  };
  s.apply(stateKey("progress", "batch_1"), encodeRecord(done), 2n);
  const o = batchObject(view());
  assert.deepEqual(
    {
      status: o["status"],
      output: o["output_file_id"],
      error: o["error_file_id"],
      counts: o["request_counts"],
      errors: o["errors"],
      cancelled_at: o["cancelled_at"],
      metadata: o["metadata"],
    },
    {
      status: "cancelled",
      output: resultFileId("batch_1", "output"),
      error: null,
      counts: { total: 5, completed: 2, failed: 0 },
      errors: null,
      cancelled_at: NOW + 2,
      metadata: { k: "v" },
    },
  );
  assert.equal(s.openBatchesOf("acme"), 0);
  // The output file exists for acme only, listed and readable, until deleted.
  const out = s.fileOf("acme", resultFileId("batch_1", "output"), NOW);
  assert.deepEqual(fileObject(out!), {
    id: resultFileId("batch_1", "output"),
    object: "file",
    bytes: 100,
    created_at: NOW + 2,
    expires_at: null,
    filename: "batch_1_output.jsonl",
    purpose: "batch_output",
    status: "processed",
    status_details: null,
  });
  assert.equal(s.fileOf("rival", resultFileId("batch_1", "output"), NOW), undefined);
  s.apply(stateKey("file", resultFileId("batch_1", "output")), Buffer.from(JSON.stringify({ v: 1, deleted: true })), 3n);
  assert.equal(s.fileOf("acme", resultFileId("batch_1", "output"), NOW), undefined);
});

test("page: OpenAI's after/limit cursor; an unknown cursor gives an empty page", () => {
  const items = ["a", "b", "c", "d"].map((id) => ({ id }));
  assert.deepEqual(page(items, undefined, 2), { data: [{ id: "a" }, { id: "b" }], hasMore: true });
  assert.deepEqual(page(items, "b", 2), { data: [{ id: "c" }, { id: "d" }], hasMore: false });
  assert.deepEqual(page(items, "zz", 2), { data: [], hasMore: false });
});
