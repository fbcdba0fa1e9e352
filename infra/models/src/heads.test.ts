/**
 * The test fleet: extra embedders and the presets with a task head (rerank, classify), checked
 * through onnxruntime-node the way a worker runs them.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { buildBertGraph, LOGITS_OUTPUT_NAME } from "./bert-graph.ts";
import { MANIFEST_FILE, parseManifest } from "./manifest.ts";
import type { ShoalModelManifest } from "./manifest.ts";
import { GENERATOR_VERSION, PRESETS } from "./presets.ts";
import type { PresetName } from "./presets.ts";
import { writeModelDir } from "./write-model-dir.ts";

let work: string;
before(async () => {
  work = await mkdtemp(join(tmpdir(), "shoal-heads-test-"));
});
after(async () => {
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

interface Loaded {
  manifest: ShoalModelManifest;
  session: ort.InferenceSession;
  tokenizer: Tokenizer;
}

const loaded = new Map<PresetName, Loaded>();
async function load(preset: PresetName): Promise<Loaded> {
  const hit = loaded.get(preset);
  if (hit) return hit;
  const dir = join(work, preset);
  await writeModelDir(PRESETS[preset], dir);
  const manifest = parseManifest(JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")));
  const session = await ort.InferenceSession.create(join(dir, manifest.onnx.file), { executionProviders: ["cpu"], intraOpNumThreads: 1 });
  const tokenizer = new Tokenizer(JSON.parse(await readFile(join(dir, manifest.tokenizer), "utf8")), {});
  const entry = { manifest, session, tokenizer };
  loaded.set(preset, entry);
  return entry;
}
after(async () => {
  for (const { session } of loaded.values()) await session.release();
});

interface Row {
  ids: number[];
  typeIds: number[];
}

/** Runs rows padded to the longest (type ids of padding are 0); returns the logits output. */
async function runRows(session: ort.InferenceSession, rows: readonly Row[]): Promise<ort.Tensor> {
  const seq = Math.max(...rows.map((r) => r.ids.length));
  const ids = new BigInt64Array(rows.length * seq);
  const mask = new BigInt64Array(rows.length * seq);
  const types = new BigInt64Array(rows.length * seq);
  rows.forEach((r, b) => {
    r.ids.forEach((id, i) => {
      ids[b * seq + i] = BigInt(id);
      mask[b * seq + i] = 1n;
      types[b * seq + i] = BigInt(r.typeIds[i] ?? 0);
    });
  });
  const shape = [rows.length, seq];
  const out = await session.run({
    input_ids: new ort.Tensor("int64", ids, shape),
    attention_mask: new ort.Tensor("int64", mask, shape),
    token_type_ids: new ort.Tensor("int64", types, shape),
  });
  const logits = out[LOGITS_OUTPUT_NAME];
  assert.ok(logits, "no logits output");
  return logits;
}

function pair(tokenizer: Tokenizer, query: string, document: string): Row {
  const e = tokenizer.encode(query, { text_pair: document, return_token_type_ids: true });
  return { ids: e.ids as number[], typeIds: e.token_type_ids as number[] };
}

function single(tokenizer: Tokenizer, text: string): Row {
  const e = tokenizer.encode(text);
  return { ids: e.ids as number[], typeIds: e.ids.map(() => 0) };
}

const TEXTS = [
  "the cat sat on the mat",
  "kafka brokers replicate partitions",
  "I love this product so much!",
  "terrible service, never again",
  "what is the capital of france",
  "paris is the capital of france",
];

describe("generator presets for the test fleet", () => {
  it("embedder bytes are unchanged (the cache key has no new generator version)", async () => {
    // If this fails on purpose, bump GENERATOR_VERSION in presets.ts and update the hash.
    assert.equal(GENERATOR_VERSION, 1);
    const hash = createHash("sha256").update(buildBertGraph(PRESETS.tiny).bytes).digest("hex");
    assert.equal(hash, "07f37c3d47147c882eba71a538eb6b6ba973c784bfd0ca76b6001b34772b45a5");
  });

  for (const preset of ["tiny-embed-b", "tiny-embed-c", "tiny-rerank", "tiny-classify", "tiny-multilabel"] as const) {
    it(`${preset}: same bytes twice`, async () => {
      await writeModelDir(PRESETS[preset], join(work, `${preset}-1`));
      await writeModelDir(PRESETS[preset], join(work, `${preset}-2`));
      assert.deepEqual(await sha256s(join(work, `${preset}-1`)), await sha256s(join(work, `${preset}-2`)));
    });
  }

  it("ids and tasks as the fleet expects; extra embedders differ from tiny", async () => {
    const summary = Object.fromEntries(
      await Promise.all(
        (["tiny-embed-b", "tiny-embed-c", "tiny-rerank", "tiny-classify", "tiny-multilabel"] as const).map(async (p) => {
          const { manifest } = await load(p);
          return [p, { id: manifest.id, task: manifest.task, output: manifest.onnx.output }] as const;
        }),
      ),
    );
    assert.deepEqual(summary, {
      "tiny-embed-b": { id: "shoal-tiny-embed-b", task: "embed", output: "last_hidden_state" },
      "tiny-embed-c": { id: "shoal-tiny-embed-c", task: "embed", output: "last_hidden_state" },
      "tiny-rerank": { id: "shoal-tiny-rerank", task: "rerank", output: "logits" },
      "tiny-classify": { id: "shoal-tiny-classify", task: "classify", output: "logits" },
      "tiny-multilabel": { id: "shoal-tiny-tags", task: "classify", output: "logits" },
    });
    const c = (await load("tiny-embed-c")).manifest;
    assert.ok(c.task === "embed" && c.dimensions === 32 && c.pooling === "cls" && c.normalize);
    const b = (await load("tiny-embed-b")).manifest;
    assert.ok(b.task === "embed" && b.dimensions === 64 && b.pooling === "mean");
  });

  it("embedders run: [batch, seq, dimensions]", async () => {
    for (const preset of ["tiny-embed-b", "tiny-embed-c"] as const) {
      const { session, tokenizer, manifest } = await load(preset);
      assert.deepEqual([...session.outputNames], ["last_hidden_state"]);
      const row = single(tokenizer, "Hello, world!");
      const out = await session.run({
        input_ids: new ort.Tensor("int64", BigInt64Array.from(row.ids, BigInt), [1, row.ids.length]),
        attention_mask: new ort.Tensor("int64", new BigInt64Array(row.ids.length).fill(1n), [1, row.ids.length]),
        token_type_ids: new ort.Tensor("int64", new BigInt64Array(row.ids.length), [1, row.ids.length]),
      });
      assert.ok(manifest.task === "embed");
      assert.deepEqual(out.last_hidden_state?.dims, [1, row.ids.length, manifest.dimensions]);
    }
  });

  it("tiny-rerank: pairs with token types 0/1 give [batch, 1] logits that depend on the document", async () => {
    const { session, tokenizer, manifest } = await load("tiny-rerank");
    assert.equal(manifest.task, "rerank");
    assert.ok(manifest.task === "rerank" && manifest.scoreActivation === "sigmoid" && manifest.hiddenSize === 64);
    assert.deepEqual([...session.inputNames].sort(), ["attention_mask", "input_ids", "token_type_ids"]);
    assert.deepEqual([...session.outputNames], ["logits"]);

    const query = "what is the capital of france";
    const rows = TEXTS.map((d) => pair(tokenizer, query, d));
    // [CLS] q [SEP] d [SEP]: type 0 through the first [SEP], 1 after.
    const first = rows[0]!;
    const sep = first.ids.indexOf(102);
    assert.equal(first.ids[0], 101);
    assert.equal(first.ids.at(-1), 102);
    assert.deepEqual(
      first.typeIds,
      first.ids.map((_, i) => (i <= sep ? 0 : 1)),
    );

    const logits = await runRows(session, rows);
    assert.deepEqual(logits.dims, [rows.length, 1]);
    const scores = Array.from(logits.data as Float32Array);
    assert.ok(scores.every(Number.isFinite));
    assert.equal(new Set(scores.map((s) => s.toFixed(3))).size, scores.length, `scores should differ: ${scores}`);

    // Padding does not change a pair's logit; token types do.
    for (const [i, row] of rows.entries()) {
      const alone = (await runRows(session, [row])).data as Float32Array;
      assert.ok(Math.abs(alone[0]! - scores[i]!) < 1e-4, `pair ${i}: ${alone[0]} alone vs ${scores[i]} in a batch`);
    }
    const noTypes = (await runRows(session, [{ ids: first.ids, typeIds: [] }])).data as Float32Array;
    assert.ok(Math.abs(noTypes[0]! - scores[0]!) > 1e-3, "token type ids should change the logit");
  });

  it("tiny-classify / tiny-multilabel: [batch, labels] logits; the winning label varies with the input", async () => {
    for (const preset of ["tiny-classify", "tiny-multilabel"] as const) {
      const { session, tokenizer, manifest } = await load(preset);
      assert.equal(manifest.task, "classify");
      if (manifest.task !== "classify") return;
      assert.deepEqual([...session.outputNames], ["logits"]);
      const labels = manifest.labels.length;
      assert.equal(labels, preset === "tiny-classify" ? 3 : 4);
      assert.equal(manifest.problemType, preset === "tiny-classify" ? "single_label" : "multi_label");
      const logits = await runRows(
        session,
        TEXTS.map((t) => single(tokenizer, t)),
      );
      assert.deepEqual(logits.dims, [TEXTS.length, labels]);
      const data = logits.data as Float32Array;
      assert.ok(
        data.every((x) => Number.isFinite(x) && Math.abs(x) < 10),
        `logits ${data}`,
      );
      const rows = TEXTS.map((_, i) => Array.from(data.subarray(i * labels, (i + 1) * labels)));
      assert.equal(new Set(rows.map((r) => r.map((x) => x.toFixed(3)).join())).size, TEXTS.length, "each input gets its own logits");
      const winners = new Set(rows.map((r) => r.indexOf(Math.max(...r))));
      assert.ok(winners.size >= 2, `${preset}: every input got label ${[...winners].join()}`);
    }
  });
});
