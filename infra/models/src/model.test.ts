import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { MANIFEST_FILE, parseManifest } from "./manifest.ts";
import type { EmbedManifest } from "./manifest.ts";
import { GENERATOR_VERSION, PRESETS } from "./presets.ts";
import { MODEL_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, writeModelDir } from "./write-model-dir.ts";

let work: string;
let dirA: string;
let manifest: EmbedManifest;
let session: ort.InferenceSession;
let tokenizer: Tokenizer;

before(async () => {
  work = await mkdtemp(join(tmpdir(), "shoal-models-test-"));
  dirA = join(work, "a");
  await writeModelDir(PRESETS.tiny, dirA);
  const parsed = parseManifest(JSON.parse(await readFile(join(dirA, MANIFEST_FILE), "utf8")));
  assert.equal(parsed.task, "embed");
  manifest = parsed as EmbedManifest;
  session = await ort.InferenceSession.create(join(dirA, manifest.onnx.file), {
    executionProviders: ["cpu"],
    intraOpNumThreads: 1,
    graphOptimizationLevel: "all",
  });
  tokenizer = new Tokenizer(
    JSON.parse(await readFile(join(dirA, manifest.tokenizer), "utf8")),
    JSON.parse(await readFile(join(dirA, TOKENIZER_CONFIG_FILE), "utf8")),
  );
});

after(async () => {
  await session?.release();
  if (work) await rm(work, { recursive: true, force: true });
});

async function sha256s(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    out[name] = createHash("sha256")
      .update(await readFile(join(dir, name)))
      .digest("hex");
  }
  return out;
}

test("generation is deterministic: same bytes twice", async () => {
  const dirB = join(work, "b");
  await writeModelDir(PRESETS.tiny, dirB);
  const [a, b] = [await sha256s(dirA), await sha256s(dirB)];
  assert.deepEqual(Object.keys(a), [MODEL_FILE, MANIFEST_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE].sort());
  assert.deepEqual(a, b);
});

test("manifest describes the tiny model", () => {
  assert.equal(manifest.id, "shoal-tiny-embed");
  assert.equal(manifest.dimensions, 64);
  assert.equal(manifest.maxSequenceLength, 128);
  assert.equal(manifest.pooling, "mean");
  assert.equal(manifest.normalize, true);
  assert.deepEqual(manifest.onnx, {
    file: "model.onnx",
    output: "last_hidden_state",
    inputs: { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: "token_type_ids" },
  });
  assert.equal(manifest.tokenizer, "tokenizer.json");
  assert.deepEqual(manifest.source, { generator: "shoal-modelgen", generatorVersion: GENERATOR_VERSION, preset: "tiny", seed: 1 });
  // ~2.06M float32 parameters, x1.5
  assert.ok(manifest.memoryBytes > 2.0e6 * 4 * 1.5 && manifest.memoryBytes < 2.2e6 * 4 * 1.5, String(manifest.memoryBytes));
});

test("session signature matches an optimum BERT export", () => {
  assert.deepEqual([...session.inputNames].sort(), ["attention_mask", "input_ids", "token_type_ids"]);
  assert.deepEqual([...session.outputNames], ["last_hidden_state"]);
});

/** Runs the model on token id rows padded to the longest; returns the output and the mask. */
async function run(rows: number[][]): Promise<{ data: Float32Array; dims: readonly number[]; mask: number[][] }> {
  const seq = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(rows.length * seq);
  const maskData = new BigInt64Array(rows.length * seq);
  const mask = rows.map((r) => Array.from({ length: seq }, (_, i) => (i < r.length ? 1 : 0)));
  rows.forEach((r, b) => {
    r.forEach((id, i) => {
      ids[b * seq + i] = BigInt(id);
      maskData[b * seq + i] = 1n;
    });
  });
  const shape = [rows.length, seq];
  const out = await session.run({
    [manifest.onnx.inputs.inputIds]: new ort.Tensor("int64", ids, shape),
    [manifest.onnx.inputs.attentionMask]: new ort.Tensor("int64", maskData, shape),
    [manifest.onnx.inputs.tokenTypeIds!]: new ort.Tensor("int64", new BigInt64Array(rows.length * seq), shape),
  });
  const t = out[manifest.onnx.output];
  assert.ok(t, "missing output");
  return { data: t.data as Float32Array, dims: t.dims, mask };
}

function meanPool(data: Float32Array, mask: number[][], batchIndex: number, seq: number, hidden: number): Float64Array {
  const v = new Float64Array(hidden);
  let n = 0;
  for (let s = 0; s < seq; s++) {
    if (mask[batchIndex]?.[s] !== 1) continue;
    n++;
    for (let h = 0; h < hidden; h++) v[h]! += data[(batchIndex * seq + s) * hidden + h]!;
  }
  return v.map((x) => x / n);
}

test("padded batch of two: shape, masking invariance, finite and non-constant output", async () => {
  const long = tokenizer.encode("The quick brown fox jumps over the lazy dog near the riverbank.").ids;
  const short = tokenizer.encode("Hello, world!").ids;
  assert.ok(long.length > short.length + 4);
  const hidden = manifest.dimensions;

  const batch = await run([long, short]);
  const seq = long.length;
  assert.deepEqual(batch.dims, [2, seq, hidden]);
  assert.ok(batch.data.every(Number.isFinite), "non-finite output");
  const min = batch.data.reduce((m, x) => Math.min(m, x), Infinity);
  const max = batch.data.reduce((m, x) => Math.max(m, x), -Infinity);
  assert.ok(max - min > 1, `output range ${min}..${max}`);

  // The short sequence alone (no padding) vs padded in the batch: same mean-pooled vector.
  const alone = await run([short]);
  assert.deepEqual(alone.dims, [1, short.length, hidden]);
  const pooledAlone = meanPool(alone.data, alone.mask, 0, short.length, hidden);
  const pooledBatched = meanPool(batch.data, batch.mask, 1, seq, hidden);
  for (let h = 0; h < hidden; h++) {
    assert.ok(Math.abs(pooledAlone[h]! - pooledBatched[h]!) < 1e-5, `dim ${h}: ${pooledAlone[h]} vs ${pooledBatched[h]}`);
  }
  // Per-token outputs of the real positions match too.
  for (let i = 0; i < short.length * hidden; i++) {
    assert.ok(Math.abs(alone.data[i]! - batch.data[seq * hidden + i]!) < 1e-4, `token value ${i}`);
  }

  // Different texts give different vectors; each token vector is LayerNorm-ed (mean 0, var 1).
  const pooledLong = meanPool(batch.data, batch.mask, 0, seq, hidden);
  const diff = pooledLong.reduce((s, x, h) => s + Math.abs(x - pooledBatched[h]!), 0);
  assert.ok(diff > 1e-2, `pooled vectors too close (${diff})`);
  const token0 = batch.data.subarray(0, hidden);
  const mean = token0.reduce((s, x) => s + x, 0) / hidden;
  const variance = token0.reduce((s, x) => s + (x - mean) ** 2, 0) / hidden;
  assert.ok(Math.abs(mean) < 1e-4 && Math.abs(variance - 1) < 1e-3, `mean ${mean} var ${variance}`);
});

test("runs at the maximum sequence length", async () => {
  const row = Array.from({ length: manifest.maxSequenceLength }, (_, i) => (i === 0 ? 101 : 1000 + i));
  const out = await run([row]);
  assert.deepEqual(out.dims, [1, manifest.maxSequenceLength, manifest.dimensions]);
  assert.ok(out.data.every(Number.isFinite));
});
