import assert from "node:assert/strict";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { InferenceError, ModelLoadError } from "./errors.ts";
import { createInferenceThreads, type InferenceThreads, type ThreadsLogger } from "./inference-threads.ts";
import { l2normalize } from "./l2-normalize.ts";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { planSubBatches } from "./padding-plan.ts";
import { createTextTokenizer, type TextTokenizer } from "./text-tokenizer.ts";
import { copyModelDir, generatedModelDir, sentences, rejection } from "./test-models.ts";

interface LogLine {
  level: "info" | "warn";
  obj: object;
  msg: string | undefined;
}

function recordingLogger(): ThreadsLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (obj, msg) => lines.push({ level: "info", obj, msg }),
    warn: (obj, msg) => lines.push({ level: "warn", obj, msg }),
  };
}

function row(vectors: Float32Array, i: number, dims: number): Float32Array {
  return vectors.subarray(i * dims, (i + 1) * dims);
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

describe("inference threads on the generated tiny model", () => {
  let spec: ModelSpec;
  let tok: TextTokenizer;
  let threads: InferenceThreads;
  const logger = recordingLogger();
  const dims = 64;

  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny"));
    tok = await createTextTokenizer(spec);
    threads = await createInferenceThreads({ spec, intraOpThreads: 1, logger });
  });
  after(() => threads.close());

  it("reports its dimensions and the CPU provider, logging no warning", () => {
    assert.equal(threads.dimensions, dims);
    assert.deepEqual(threads.info, { modelId: "shoal-tiny-embed", runtime: "onnx", provider: "cpu", requestedProvider: "cpu", threads: 1, intraOpThreads: 1 });
    assert.equal(logger.lines.filter((l) => l.level === "warn").length, 0);
  });

  it("a text embedded alone equals the same text inside a batch of 32 ragged texts (1e-5 after normalisation)", async () => {
    const texts = sentences(32, 40, 11);
    const ids = texts.map((t) => tok.encode(t, { truncate: true }).ids);
    const lengths = ids.map((x) => x.length);
    assert.ok(Math.max(...lengths) - Math.min(...lengths) > 40, `lengths ${Math.min(...lengths)}..${Math.max(...lengths)}`);

    // Planned sub-batches, as the worker will send them.
    const plan = planSubBatches(lengths, { perCallOverheadTokens: 64, maxItemsPerCall: 32 });
    assert.ok(plan.length > 1);
    const planned = await threads.run(plan.map((g) => ({ ids: g.map((i) => ids[i]!) })));
    assert.equal(planned.vectors.length, 32 * dims);
    assert.equal(
      planned.paddedTokens,
      plan.reduce((s, g) => s + g.length * Math.max(...g.map((i) => lengths[i]!)), 0),
    );
    assert.ok(planned.inferenceMs > 0);
    const order = plan.flat();
    // One group padded to the longest: every short text sits on heavy padding.
    const padded = await threads.run([{ ids }]);
    assert.equal(padded.paddedTokens, 32 * Math.max(...lengths));
    l2normalize(planned.vectors, dims);
    l2normalize(padded.vectors, dims);

    for (let i = 0; i < 32; i++) {
      const alone = (await threads.run([{ ids: [ids[i]!] }])).vectors;
      l2normalize(alone, dims);
      const inPlan = row(planned.vectors, order.indexOf(i), dims);
      assert.ok(maxAbsDiff(alone, inPlan) < 1e-5, `text ${i} in planned batch: ${maxAbsDiff(alone, inPlan)}`);
      assert.ok(maxAbsDiff(alone, row(padded.vectors, i, dims)) < 1e-5, `text ${i} in padded batch: ${maxAbsDiff(alone, row(padded.vectors, i, dims))}`);
    }
  });

  it("returns finite, distinct, un-normalised vectors of the right size; normalised norms are 1 within 1e-6", async () => {
    const ids = ["shoal", "a school of fish", "the quick brown fox jumps over the lazy dog"].map((t) => tok.encode(t, { truncate: true }).ids);
    const { vectors } = await threads.run([{ ids: [ids[0]!] }, { ids: [ids[1]!, ids[2]!] }]);
    assert.equal(vectors.length, 3 * dims);
    assert.ok(vectors.every(Number.isFinite));
    const norms = [0, 1, 2].map((i) => Math.hypot(...row(vectors, i, dims)));
    assert.ok(
      norms.some((n) => Math.abs(n - 1) > 1e-3),
      `threads output is not normalised (norms ${norms.join(", ")})`,
    );
    assert.ok(maxAbsDiff(row(vectors, 0, dims), row(vectors, 1, dims)) > 1e-3);
    l2normalize(vectors, dims);
    for (let i = 0; i < 3; i++) {
      let s = 0;
      for (const x of row(vectors, i, dims)) s += x * x;
      assert.ok(Math.abs(Math.sqrt(s) - 1) < 1e-6, `row ${i} norm ${Math.sqrt(s)}`);
    }
  });

  it("queues concurrent runs on one thread and answers each with its own vectors", async () => {
    const ids = sentences(8, 30, 21).map((t) => tok.encode(t, { truncate: true }).ids);
    const sequential: Float32Array[] = [];
    for (const x of ids) sequential.push((await threads.run([{ ids: [x] }])).vectors);
    const concurrent = await Promise.all(ids.map((x) => threads.run([{ ids: [x] }])));
    concurrent.forEach((r, i) => {
      assert.ok(maxAbsDiff(r.vectors, sequential[i]!) < 1e-6, `run ${i}`);
    });
  });

  it("rejects malformed input with InferenceError(invalid-input) and an empty run with no vectors", async () => {
    const err = await rejection(threads.run([{ ids: [[101, 102]] }, { ids: [] }]));
    assert.ok(err instanceof InferenceError && err.reason === "invalid-input", String(err));
    const err2 = await rejection(threads.run([{ ids: [[101, -5, 102]] }]));
    assert.ok(err2 instanceof InferenceError && err2.reason === "invalid-input", String(err2));
    const empty = await threads.run([]);
    assert.equal(empty.vectors.length, 0);
  });

  it("rejects a run ONNX Runtime fails (id outside the vocabulary) with InferenceError(run-failed), then keeps serving", async () => {
    const err = await rejection(threads.run([{ ids: [[101, 5_000_000, 102]] }]));
    assert.ok(err instanceof InferenceError && err.reason === "run-failed", String(err));
    assert.match((err as Error).message, /session\.run failed on a 1×3 group/);
    const ok = await threads.run([{ ids: [[101, 2000, 102]] }]);
    assert.equal(ok.vectors.length, dims);
  });
});

describe("inference threads lifecycle", () => {
  let tiny: string;
  let spec: ModelSpec;
  before(async () => {
    tiny = await generatedModelDir("tiny");
    spec = await readModelDir(tiny);
  });

  it("cuda requested without a GPU (none here) falls back to CPU with exactly one warning", async () => {
    const logger = recordingLogger();
    const threads = await createInferenceThreads({ spec, threads: 2, intraOpThreads: 1, executionProvider: "cuda", logger });
    try {
      assert.equal(threads.info.provider, "cpu");
      assert.equal(threads.info.requestedProvider, "cuda");
      const warnings = logger.lines.filter((l) => l.level === "warn");
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.match(warnings[0]!.msg ?? "", /CUDA execution provider unavailable, running inference on CPU/);
      assert.match(JSON.stringify(warnings[0]!.obj), /CUDA provider libraries are not installed/);
      const r = await threads.run([{ ids: [[101, 2000, 102]] }]);
      assert.equal(r.vectors.length, 64);
    } finally {
      await threads.close();
    }
  });

  it("rejects a corrupt model.onnx with ModelLoadError, leaving the process running", async () => {
    const { dir, dispose } = await copyModelDir(tiny);
    try {
      await writeFile(join(dir, "model.onnx"), Buffer.from("this is not an onnx protobuf, just garbage bytes \x00\xff\x13"));
      const corrupt = await readModelDir(dir);
      const err = await rejection(createInferenceThreads({ spec: corrupt, threads: 2, intraOpThreads: 1 }));
      assert.ok(err instanceof ModelLoadError, String(err));
      assert.equal(err.path, join(dir, "model.onnx"));
      assert.match(err.message, /onnx\.file: ONNX Runtime cannot load it/);
    } finally {
      await dispose();
    }
    // Still alive, and a good model still loads.
    const threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
    await threads.close();
  });

  it("rejects a model.onnx deleted after the manifest was read with ModelLoadError", async () => {
    const { dir, dispose } = await copyModelDir(tiny);
    try {
      const copy = await readModelDir(dir);
      await rm(join(dir, "model.onnx"));
      await assert.rejects(createInferenceThreads({ spec: copy, intraOpThreads: 1 }), ModelLoadError);
    } finally {
      await dispose();
    }
  });

  it("rejects a manifest that does not match the graph with ModelLoadError listing each mismatch", async () => {
    const wrong: ModelSpec = { ...spec, dimensions: 65, inputNames: { ...spec.inputNames, inputIds: "ids" } };
    const err = await rejection(createInferenceThreads({ spec: wrong, intraOpThreads: 1 }));
    assert.ok(err instanceof ModelLoadError, String(err));
    assert.deepEqual(
      err.problems.map((p) => p.slice(0, p.indexOf(":"))),
      ["onnx.inputs.inputIds", "onnx.inputs", "dimensions"],
    );
  });

  it("close is idempotent, lets a running run finish, and rejects later runs with InferenceError(closed)", async () => {
    const threads = await createInferenceThreads({ spec, intraOpThreads: 1 });
    // A first run proves the thread has its session: run() then hands the next run to it
    // synchronously, and a second one queues behind it (all before close, in one tick).
    await threads.run([{ ids: [[101, 102]] }]);
    const running = threads.run([{ ids: [[101, 2000, 2001, 102]] }]);
    const queued = threads.run([{ ids: [[101, 2000, 102]] }]);
    const first = threads.close();
    const second = threads.close();
    assert.equal(first, second);
    const [run, queue] = await Promise.allSettled([running, queued]);
    assert.equal(run.status, "fulfilled");
    assert.ok(queue.status === "rejected" && queue.reason instanceof InferenceError && queue.reason.reason === "closed");
    await first;
    await threads.close();
    const err = await rejection(threads.run([{ ids: [[101, 102]] }]));
    assert.ok(err instanceof InferenceError && err.reason === "closed");
  });

  it("spreads concurrent runs over two threads with the same results as one thread", async () => {
    const tok = await createTextTokenizer(spec);
    const ids = sentences(12, 30, 5).map((t) => tok.encode(t, { truncate: true }).ids);
    const one = await createInferenceThreads({ spec, threads: 1, intraOpThreads: 1 });
    const two = await createInferenceThreads({ spec, threads: 2, intraOpThreads: 1 });
    try {
      const a = await Promise.all(ids.map((x) => one.run([{ ids: [x] }])));
      const b = await Promise.all(ids.map((x) => two.run([{ ids: [x] }])));
      a.forEach((r, i) => {
        assert.ok(maxAbsDiff(r.vectors, b[i]!.vectors) < 1e-6);
      });
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });

  it("a crashed thread rejects its run with InferenceError(thread-crashed) and is replaced", async () => {
    const logger = recordingLogger();
    const threads = await createInferenceThreads({
      spec,
      intraOpThreads: 1,
      logger,
      threadEntry: new URL("./crashing-thread.fixture.mjs", import.meta.url),
    });
    try {
      for (const [cue, why] of [
        [666_666, /exited with code 3/],
        [777_777, /crashed \(injected uncaught error\)/],
      ] as const) {
        const doomed = threads.run([{ ids: [[cue, 101, 102]] }]);
        const waiting = threads.run([{ ids: [[101, 2000, 102]] }]); // queued behind it: must run on the replacement
        const err = await rejection(doomed);
        assert.ok(err instanceof InferenceError && err.reason === "thread-crashed", String(err));
        assert.match((err as Error).message, why);
        assert.equal((await waiting).vectors.length, 64);
      }
      assert.equal(logger.lines.filter((l) => l.msg === "inference thread lost, starting a replacement").length, 2);
    } finally {
      await threads.close();
    }
  });
});
