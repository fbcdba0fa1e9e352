import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test } from "node:test";
import type { CatalogModel } from "@shoal/common";
import { EmbeddingType, InputType } from "@shoal/gen/shoal/v1/common_pb.ts";
import { CallCancelledError, DeadlineError } from "../errors.ts";
import { callWait, EmbedCache, type EmbedTaskOptions, isBatchDependent } from "./embed-cache.ts";
import { type EmbedRow, outputOf, rowsOf } from "./embed-rows.ts";

const model = (id: string, fields: { revision?: string; modelPath?: string; source?: Record<string, unknown>; onnxVariant?: string } = {}): CatalogModel =>
  ({
    id,
    pool: "p",
    revision: fields.revision ?? "rev-1",
    ...(fields.onnxVariant === undefined ? {} : { onnxVariant: fields.onnxVariant }),
    spec: { task: "embed", dimensions: 4, modelPath: fields.modelPath ?? "/m/onnx/model.onnx", source: fields.source, maxSequenceLength: 128 },
  }) as unknown as CatalogModel;

const OPTIONS: EmbedTaskOptions = { normalize: true, truncate: false };
const MINILM = model("minilm");

/** A stand-in encoder: a 4-dimension vector from the text's characters, after `delayMs` like a real job. */
function encoder(delayMs = 10) {
  const jobs: string[][] = [];
  const row = (text: string): EmbedRow => ({
    dimensions: 4,
    maxSequenceLength: 128,
    tokens: text.split(" ").length + 2,
    truncated: false,
    vector: Float32Array.from([text.length, text.charCodeAt(0), text.charCodeAt(text.length - 1), 1]),
    int8: undefined,
    uint8: undefined,
    binary: undefined,
    ubinary: undefined,
  });
  return {
    jobs,
    row,
    compute: async (texts: string[]): Promise<EmbedRow[]> => {
      jobs.push(texts);
      await sleep(delayMs);
      return texts.map(row);
    },
  };
}

const forever = callWait(new AbortController().signal, Date.now() + 60_000, 60_000);
const vectors = (rows: readonly EmbedRow[]): number[][] => rows.map((r) => Array.from(r.vector ?? []));

describe("EmbedCache", () => {
  test("a repeated text is answered from the cache: no second job, the same vector, its tokens reported as reused", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder();
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const first = await cache.embed(scope, "interactive", ["alpha beta"], enc.compute, forever);
    const second = await cache.embed(scope, "interactive", ["alpha beta"], enc.compute, forever);
    assert.deepEqual(enc.jobs, [["alpha beta"]]);
    assert.deepEqual(vectors(second.rows), vectors(first.rows));
    assert.deepEqual({ inputs: first.reusedInputs, tokens: first.reusedTokens }, { inputs: 0, tokens: 0 });
    assert.deepEqual({ inputs: second.reusedInputs, tokens: second.reusedTokens }, { inputs: 1, tokens: 4 });
    assert.ok(cache.bytes > 0 && cache.entries === 1);
  });

  test("partial hits: of 10 texts with 7 cached, only the 3 others go out as one job, and the answer keeps input order", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder();
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const texts = Array.from({ length: 10 }, (_, i) => `text number ${i}`);
    const cached = [0, 1, 3, 4, 6, 7, 9].map((i) => texts[i]!);
    await cache.embed(scope, "interactive", cached, enc.compute, forever);
    const got = await cache.embed(scope, "interactive", texts, enc.compute, forever);
    assert.deepEqual(enc.jobs[1], [texts[2], texts[5], texts[8]]);
    assert.deepEqual(vectors(got.rows), vectors(texts.map(enc.row)));
    assert.equal(got.reusedInputs, 7);
  });

  test("a text repeated within one call is computed once and answered at each of its places", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder();
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const got = await cache.embed(scope, "interactive", ["a x", "b y", "a x", "a x"], enc.compute, forever);
    assert.deepEqual(enc.jobs, [["a x", "b y"]]);
    assert.deepEqual(vectors(got.rows), vectors(["a x", "b y", "a x", "a x"].map(enc.row)));
    assert.equal(got.reusedInputs, 2);
  });

  test("concurrent calls for the same text make one job; the others wait for it", async () => {
    const counts = { hit: 0, miss: 0, join: 0 };
    const cache = new EmbedCache({
      maxBytes: 1 << 20,
      batchDependentModels: false,
      events: { hit: () => counts.hit++, miss: () => counts.miss++, join: () => counts.join++ },
    });
    const enc = encoder(30);
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const calls = await Promise.all(Array.from({ length: 8 }, () => cache.embed(scope, "interactive", ["the same text"], enc.compute, forever)));
    assert.deepEqual(enc.jobs, [["the same text"]]);
    for (const c of calls) assert.deepEqual(vectors(c.rows), vectors([enc.row("the same text")]));
    assert.deepEqual(counts, { hit: 0, miss: 1, join: 7 });
    assert.deepEqual(
      calls.map((c) => c.reusedInputs),
      [0, 1, 1, 1, 1, 1, 1, 1],
    );
  });

  test("a waiter gets DeadlineExceeded at its own deadline while the owner's job goes on and is cached", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder(300);
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const owner = cache.embed(scope, "interactive", ["slow text"], enc.compute, forever);
    const started = Date.now();
    const waiter = cache.embed(scope, "interactive", ["slow text"], enc.compute, callWait(new AbortController().signal, Date.now() + 50, 50));
    await assert.rejects(waiter, (err: unknown) => err instanceof DeadlineError && err.timeoutMs === 50);
    const waited = Date.now() - started;
    assert.ok(waited >= 45 && waited < 250, `the waiter failed at its own deadline (${waited} ms)`);
    assert.deepEqual(vectors((await owner).rows), vectors([enc.row("slow text")]));
    assert.equal(enc.jobs.length, 1);
    const later = await cache.embed(scope, "interactive", ["slow text"], enc.compute, forever);
    assert.equal(later.reusedInputs, 1);
  });

  test("an owner whose job fails or is cancelled does not fail its waiters: they compute the text themselves", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder(20);
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const ownerCall = new AbortController();
    // The owner's job follows its caller, as PendingJobs does: a cancelled caller's job rejects.
    const ownerJob = async (texts: string[]): Promise<EmbedRow[]> => {
      enc.jobs.push(texts);
      await new Promise((_, reject) => ownerCall.signal.addEventListener("abort", () => reject(ownerCall.signal.reason), { once: true }));
      return [];
    };
    const owner = cache.embed(scope, "interactive", ["shared", "mine"], ownerJob, callWait(ownerCall.signal, Date.now() + 60_000, 60_000));
    const waiters = Promise.all([
      cache.embed(scope, "interactive", ["shared"], enc.compute, forever),
      cache.embed(scope, "interactive", ["other", "shared"], enc.compute, forever),
    ]);
    await sleep(20);
    ownerCall.abort(new CallCancelledError("the caller left"));
    await assert.rejects(owner, CallCancelledError);
    const [w1, w2] = await waiters;
    assert.deepEqual(vectors(w1.rows), vectors([enc.row("shared")]));
    assert.deepEqual(vectors(w2.rows), vectors([enc.row("other"), enc.row("shared")]));
    // The owner's job, the second call's own text, then one retry of "shared" joined by the other waiter.
    assert.deepEqual(enc.jobs.length, 3);
    assert.equal(enc.jobs.flat().filter((t) => t === "shared").length, 2);

    const failing = cache.scopeOf(MINILM, "", { ...OPTIONS, normalize: false })!;
    const broken = cache.embed(
      failing,
      "interactive",
      ["t"],
      async () => {
        await sleep(10);
        throw new Error("worker failed");
      },
      forever,
    );
    const rescued = cache.embed(failing, "interactive", ["t"], enc.compute, forever);
    await assert.rejects(broken, /worker failed/);
    assert.deepEqual(vectors((await rescued).rows), vectors([enc.row("t")]));
  });

  test("a caller that leaves while waiting is answered with its cancel reason", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const enc = encoder(200);
    const scope = cache.scopeOf(MINILM, "", OPTIONS)!;
    const owner = cache.embed(scope, "interactive", ["x"], enc.compute, forever);
    const call = new AbortController();
    const waiter = cache.embed(scope, "interactive", ["x"], enc.compute, callWait(call.signal, Date.now() + 60_000, 60_000));
    call.abort(new CallCancelledError("gone"));
    await assert.rejects(waiter, /gone/);
    await owner;
  });

  test("keys: another revision, model file, model, tenant or option misses; the same model and options hit", async () => {
    const cache = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const base = cache.scopeOf(MINILM, "", OPTIONS);
    const others = [
      cache.scopeOf(model("minilm", { revision: "rev-2" }), "", OPTIONS),
      cache.scopeOf(model("minilm", { modelPath: "/other/model.onnx" }), "", OPTIONS),
      cache.scopeOf(model("e5"), "", OPTIONS),
      cache.scopeOf(MINILM, "tenant-b", OPTIONS),
      cache.scopeOf(MINILM, "", { ...OPTIONS, normalize: false }),
      cache.scopeOf(MINILM, "", { ...OPTIONS, inputType: InputType.QUERY }),
      cache.scopeOf(MINILM, "", { ...OPTIONS, dimensions: 2 }),
      cache.scopeOf(MINILM, "", { ...OPTIONS, truncate: true }),
      cache.scopeOf(MINILM, "", { ...OPTIONS, embeddingTypes: [EmbeddingType.INT8] }),
    ];
    assert.equal(new Set([base, ...others]).size, others.length + 1);
    assert.equal(cache.scopeOf(model("minilm"), "", { ...OPTIONS }), base, "the same model and options: the same key");
    const enc = encoder();
    await cache.embed(base!, "interactive", ["t"], enc.compute, forever);
    await cache.embed(others[0]!, "interactive", ["t"], enc.compute, forever);
    assert.equal(enc.jobs.length, 2);
  });

  test("dynamic-int8 models are not cached unless asked for", () => {
    const quantized = [
      model("q1", { source: { quantized: true } }),
      model("q2", { modelPath: "/hf/onnx/model_quantized.onnx" }),
      model("q3", { onnxVariant: "qint8_avx512" }),
      model("q4", { modelPath: "/hf/onnx/model_uint8.onnx" }),
    ];
    for (const m of quantized) assert.equal(isBatchDependent(m), true, m.id);
    assert.equal(isBatchDependent(MINILM), false);
    assert.equal(isBatchDependent(model("fp16", { onnxVariant: "fp16" })), false);
    const off = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false });
    const on = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: true });
    for (const m of quantized) {
      assert.equal(off.scopeOf(m, "", OPTIONS), undefined);
      assert.notEqual(on.scopeOf(m, "", OPTIONS), undefined);
    }
  });

  test("bounded by bytes: the least recently used texts are evicted and computed again", async () => {
    const evicted = { n: 0 };
    const enc = encoder(1);
    const scope = new EmbedCache({ maxBytes: 1 << 20, batchDependentModels: false }).scopeOf(MINILM, "", OPTIONS)!;
    // Each entry: 2 bytes per key character + 16 vector bytes + 120 of bookkeeping.
    const entry = (scope.length + 6) * 2 + 16 + 120;
    const cache = new EmbedCache({ maxBytes: entry * 3, batchDependentModels: false, events: { evict: () => evicted.n++ } });
    for (const t of ["text-1", "text-2", "text-3", "text-4"]) await cache.embed(scope, "interactive", [t], enc.compute, forever);
    assert.equal(cache.entries, 3);
    assert.equal(cache.bytes, entry * 3);
    assert.equal(evicted.n, 1);
    const again = await cache.embed(scope, "interactive", ["text-1", "text-4"], enc.compute, forever);
    assert.deepEqual(enc.jobs.at(-1), ["text-1"]);
    assert.equal(again.reusedInputs, 1);
    assert.ok(cache.bytes <= entry * 3);
  });
});

describe("embed rows", () => {
  test("split and joined again, a worker's output is unchanged", () => {
    const enc = encoder();
    const rows = ["one", "two words", "three more words"].map(enc.row);
    const out = outputOf(rows);
    assert.equal(out.dimensions, 4);
    assert.deepEqual(out.tokenCounts, [3, 4, 5]);
    const back = rowsOf(out, 3);
    assert.deepEqual(vectors(back), vectors(rows));
    // Copies: a row does not hold the output's buffer.
    assert.equal(back[0]!.vector!.buffer.byteLength, 16);
  });
});
