import assert from "node:assert/strict";
import { test } from "node:test";
import { linesOf } from "./batch-lines.ts";
import type { BatchRecord, ChunkRef, ProgressRecord } from "./batch-records.ts";
import { type LineOutcome, runBatch, type RunDeps } from "./batch-run.ts";

const N = 40;
const BATCH: BatchRecord = {
  v: 1,
  id: "batch_test",
  tenant: "acme",
  endpoint: "/v1/embeddings",
  inputFileId: "file-in",
  completionWindow: "24h",
  createdAt: 1_000,
  expiresAt: 1_000 + 86_400,
  metadata: null,
};

/** Input: N requests; every 7th asks for a model that fails with a 404. */
const INPUT = `${Array.from({ length: N }, (_, i) =>
  JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/embeddings", body: { model: i % 7 === 3 ? "missing" : "m", input: `text ${i}` } }),
).join("\n")}\n`;

/** An in-memory world: chunks, snapshots and calls, with answers that finish out of order. */
function world(opts: { cancelAfterCalls?: number; expireAfterCalls?: number; failWriteAt?: number } = {}) {
  const chunks: Buffer[] = [];
  const saved: ProgressRecord[] = [];
  const calls = new Map<string, number>();
  let clock = 1_000_000;
  let writes = 0;
  const deps = (owner: string): RunDeps => ({
    batch: BATCH,
    owner,
    limits: { maxLinesInFlight: 4, chunkBytes: 256, checkpointMs: 1, maxLines: 1000, maxErrors: 10 },
    lines: () =>
      linesOf(
        (async function* () {
          yield Buffer.from(INPUT);
        })(),
      ),
    async call(line, signal): Promise<LineOutcome> {
      calls.set(line.customId, (calls.get(line.customId) ?? 0) + 1);
      const total = [...calls.values()].reduce((a, b) => a + b, 0);
      if (opts.expireAfterCalls !== undefined && total >= opts.expireAfterCalls) clock = BATCH.expiresAt * 1000 + 1;
      // Later lines tend to finish first.
      await new Promise((r) => setTimeout(r, (line.index * 7) % 5));
      if (signal.aborted) return { kind: "aborted" };
      if (line.body["model"] === "missing") return { kind: "response", statusCode: 404, body: { error: { code: "model_not_found" } } };
      return { kind: "response", statusCode: 200, body: { object: "list", data: [{ embedding: [line.index] }] } };
    },
    async writeChunk(_kind, bytes): Promise<ChunkRef> {
      writes++;
      if (writes === opts.failWriteAt) throw new Error("broker gone");
      chunks.push(Buffer.from(bytes));
      return { partition: 0, offset: String(chunks.length - 1), bytes: bytes.length };
    },
    async save(p) {
      saved.push(p);
    },
    cancelled: () => opts.cancelAfterCalls !== undefined && [...calls.values()].reduce((a, b) => a + b, 0) >= opts.cancelAfterCalls,
    nowMs: () => (clock += 10),
  });
  /** The JSON lines a snapshot's chunks hold. */
  const read = (refs: readonly ChunkRef[]): Array<Record<string, unknown>> =>
    Buffer.concat(refs.map((r) => chunks[Number(r.offset)]!))
      .toString()
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { deps, saved, calls, read };
}

/** custom_ids of a snapshot's output and error files; asserts none appears twice. */
function idsOnce(w: ReturnType<typeof world>, p: ProgressRecord): { output: string[]; errors: string[] } {
  const output = w.read(p.output).map((l) => l["custom_id"] as string);
  const errors = w.read(p.errorChunks).map((l) => l["custom_id"] as string);
  const all = [...output, ...errors];
  assert.equal(new Set(all).size, all.length, "a custom_id appears twice");
  return { output, errors };
}

test("a whole run: validated, every line answered once, in input order, 404s in the error file, counts and timestamps set", async () => {
  const w = world();
  const p = await runBatch(w.deps("g1"), undefined, new AbortController().signal);
  assert.equal(p.status, "completed");
  assert.deepEqual([p.total, p.completed, p.failed, p.nextLine], [N, 34, 6, N]);
  assert.equal(w.saved[0]!.status, "in_progress");
  assert.ok(p.inProgressAt !== null && p.finalizingAt !== null && p.completedAt !== null);
  const { output, errors } = idsOnce(w, p);
  assert.deepEqual(
    output,
    Array.from({ length: N }, (_, i) => i)
      .filter((i) => i % 7 !== 3)
      .map((i) => `req-${i}`),
  );
  assert.deepEqual(errors, ["req-3", "req-10", "req-17", "req-24", "req-31", "req-38"]);
  const first = w.read(p.output)[0]!;
  assert.match(first["id"] as string, /^batch_req_[0-9a-f]{24}$/);
  assert.deepEqual(first["response"], {
    status_code: 200,
    request_id: `req_${(first["id"] as string).slice(10)}`,
    body: { object: "list", data: [{ embedding: [0] }] },
  });
  assert.equal(first["error"], null);
  assert.equal((w.read(p.errorChunks)[0]!["response"] as { status_code: number }).status_code, 404);
  assert.ok(p.output.length > 1, "the output spans several chunks");
  assert.ok(
    p.output.every((c) => c.bytes <= 256),
    "chunks are at most chunkBytes",
  );
  assert.deepEqual([...w.calls.values()], Array(N).fill(1));
});

test("a run stopped mid-way (its gateway lost) resumes from its last snapshot: lines done are not redone, each custom_id once", async () => {
  const w = world();
  const stop = new AbortController();
  const first = w.deps("g1");
  const stopping = {
    ...first,
    save: async (p: ProgressRecord) => {
      await first.save(p);
      if (p.nextLine >= 12) stop.abort(new Error("partition revoked"));
    },
  };
  const stopped = await runBatch(stopping, undefined, stop.signal);
  assert.equal(stopped.status, "in_progress");
  const snapshot = w.saved.at(-1)!;
  assert.ok(snapshot.nextLine >= 12 && snapshot.nextLine < N, `stopped at ${snapshot.nextLine}`);
  const callsBefore = new Map(w.calls);

  const p = await runBatch(w.deps("g2"), snapshot, new AbortController().signal);
  assert.equal(p.status, "completed");
  assert.equal(p.owner, "g2");
  const { output, errors } = idsOnce(w, p);
  assert.equal(output.length + errors.length, N);
  assert.deepEqual([p.completed, p.failed], [34, 6]);
  for (let i = 0; i < snapshot.nextLine; i++) {
    assert.equal(w.calls.get(`req-${i}`), callsBefore.get(`req-${i}`), `req-${i} was done before the snapshot and not again`);
  }
});

test("a write that fails ends the run; resuming from the last snapshot still answers each line exactly once", async () => {
  const w = world({ failWriteAt: 3 });
  await assert.rejects(runBatch(w.deps("g1"), undefined, new AbortController().signal), /broker gone/);
  const p = await runBatch(w.deps("g2"), w.saved.at(-1), new AbortController().signal);
  assert.equal(p.status, "completed");
  const { output, errors } = idsOnce(w, p);
  assert.equal(output.length + errors.length, N);
});

test("cancel: no new line starts, the ones in flight finish and are written, the batch ends cancelled", async () => {
  const w = world({ cancelAfterCalls: 10 });
  const p = await runBatch(w.deps("g1"), undefined, new AbortController().signal);
  assert.equal(p.status, "cancelled");
  assert.ok(p.cancelledAt !== null);
  const { output, errors } = idsOnce(w, p);
  // The 10th call tripped the cancel; nothing was submitted after it.
  assert.equal(w.calls.size, 10);
  assert.equal(output.length + errors.length, 10);
  assert.deepEqual([p.completed + p.failed, p.total], [10, N]);
});

test("expiry: the lines never run go to the error file as batch_expired; every custom_id exactly once", async () => {
  const w = world({ expireAfterCalls: 15 });
  const p = await runBatch(w.deps("g1"), undefined, new AbortController().signal);
  assert.equal(p.status, "expired");
  const { output, errors } = idsOnce(w, p);
  assert.equal(output.length + errors.length, N);
  const expired = w.read(p.errorChunks).filter((l) => (l["error"] as { code?: string } | null)?.code === "batch_expired");
  assert.equal(expired.length, N - 15);
  assert.equal(expired[0]!["response"], null);
  assert.equal(p.completed + p.failed, N);
});

test("validation failure: a file that is not JSONL fails the batch with errors.data, nothing runs", async () => {
  const w = world();
  const deps = {
    ...w.deps("g1"),
    lines: () =>
      linesOf(
        (async function* () {
          yield Buffer.from("id,text\n1,hello\n");
        })(),
      ),
  };
  const p = await runBatch(deps, undefined, new AbortController().signal);
  assert.equal(p.status, "failed");
  assert.deepEqual(
    p.errors?.map((e) => [e.code, e.line]),
    [
      ["invalid_json_line", 1],
      ["invalid_json_line", 2],
    ],
  );
  assert.equal(w.calls.size, 0);
  const gone = await runBatch({ ...w.deps("g1"), lines: () => undefined }, undefined, new AbortController().signal);
  assert.deepEqual([gone.status, gone.errors?.[0]?.code], ["failed", "invalid_file"]);
});
