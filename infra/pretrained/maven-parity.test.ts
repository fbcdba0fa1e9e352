/**
 * Shoal serves the Maven-fetched embedders (infra/models/src/maven-models.ts) correctly: each
 * ONNX file, run the way a worker runs it (readModelDir, its tokenizer with truncation, inference
 * threads, pooling, normalisation, with the manifest's query prompt in front), gives the vectors
 * of a reference run of the same file: Python onnxruntime + the Rust `tokenizers` library + numpy
 * pooling as the model cards describe (reference_onnx.py, in a ~220 MB venv from PyPI, no torch).
 * Everything Shoal adds around the graph (tokenization, truncation, padding, pooling, prompts,
 * normalisation) is on trial; the graph itself is the same file on both sides.
 *
 * Quantized models are also compared with their fp32 sibling's reference, with a looser bound:
 * int8 dynamic quantisation moves each vector a little (measured below), while a Shoal bug (wrong
 * pooling, a lost prompt, ids off by one) drops cosines far below it.
 *
 * First run: the jars through Maven (~300 MB on a cold ~/.m2) and the venv (~30 s); later runs
 * reuse both. Skipped only with SHOAL_SKIP_PRETRAINED=1.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { readModelDir, type EmbedModelSpec } from "../../services/common/src/model-manifest.ts";
import { createInferenceThreads } from "../../services/worker/src/runtime/inference-threads.ts";
import { l2normalize } from "../../services/worker/src/runtime/l2-normalize.ts";
import { createTextTokenizer } from "../../services/worker/src/runtime/text-tokenizer.ts";
import { BGE_QUERY_INSTRUCTION, ensureMavenModel, MAVEN_EMBEDDERS } from "../models/src/maven-models.ts";
import { ensurePythonEnv, runLogged } from "../models/src/python-env.ts";
import { cosine } from "./cosine.ts";

const HERE = fileURLToPath(new URL("./", import.meta.url));
const SENTENCES_FILE = join(HERE, "sentences.json");
const REQUIREMENTS = join(HERE, "requirements-onnx.txt");
/** Same file on both sides: only float summation order differs. */
const MIN_COSINE = 0.9999;
/**
 * int8 vs fp32 of the same model, each text alone. Measured on sentences.json: lowest 0.982
 * (all-minilm-l6-v2-q), 0.989 (bge-small-en-v1.5-q), 0.996 (e5-small-v2-q); means 0.991-0.997.
 * A Shoal bug such as the wrong pooling or a lost prompt gives 0.3-0.9 on most sentences.
 */
const MIN_COSINE_QUANTIZED = 0.97;
/**
 * A quantized model in a padded batch vs the same file on one text. Its DynamicQuantizeLinear
 * picks one activation scale per tensor, over the whole batch (padding included), so a text's
 * vector depends on its batch companions. Measured: lowest 0.967 (all-minilm-l6-v2-q, the
 * shortest texts batched with 256-token ones), 0.990 (bge), 0.995 (e5).
 */
const MIN_COSINE_QUANTIZED_PADDED = 0.95;
const MIN_MARGIN = 0.1;

/** What the model cards say, written here independently of maven-models.ts to check its manifests. */
const CARDS: Record<string, { pooling: "mean" | "cls"; maxLength: number; query?: string; passage?: string }> = {
  "all-minilm-l6-v2": { pooling: "mean", maxLength: 256 },
  "bge-small-en-v1.5": { pooling: "cls", maxLength: 512, query: "Represent this sentence for searching relevant passages: " },
  "e5-small-v2": { pooling: "mean", maxLength: 512, query: "query: ", passage: "passage: " },
};

interface Reference {
  versions: Record<string, string>;
  models: Record<string, { inputIds: number[][]; embeddings: number[][] }>;
}

const skip = process.env["SHOAL_SKIP_PRETRAINED"] === "1" ? "SHOAL_SKIP_PRETRAINED=1" : false;
const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

const card = (id: string) => CARDS[id.replace(/-q$/, "")]!;

describe("Maven-fetched embedders match a reference run of the same ONNX file", { skip }, () => {
  let work: string;
  let sentences: string[];
  let related: [number, number, number][];
  let reference: Reference;
  const specs = new Map<string, EmbedModelSpec>();
  const figures: string[] = [];

  before(
    async () => {
      const t0 = performance.now();
      for (const m of MAVEN_EMBEDDERS) {
        const spec = await readModelDir(await ensureMavenModel(m.id, { log }));
        assert.ok(spec.task === "embed");
        specs.set(m.id, spec);
      }
      log(`models ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      const env = await ensurePythonEnv("onnx-reference", REQUIREMENTS, { log });
      const set = JSON.parse(await readFile(SENTENCES_FILE, "utf8")) as { sentences: string[]; related: [number, number, number][] };
      ({ sentences, related } = set);
      work = await mkdtemp(join(tmpdir(), "shoal-maven-parity-"));
      const jobs = MAVEN_EMBEDDERS.map((m) => ({
        id: m.id,
        model: specs.get(m.id)!.modelPath,
        tokenizer: specs.get(m.id)!.tokenizerPath,
        pooling: card(m.id).pooling,
        maxLength: card(m.id).maxLength,
        prompt: card(m.id).query ?? "",
      }));
      await writeFile(join(work, "jobs.json"), JSON.stringify(jobs));
      await runLogged(
        env.python,
        ["-B", join(HERE, "reference_onnx.py"), "--jobs", join(work, "jobs.json"), "--sentences", SENTENCES_FILE, "--out", join(work, "reference.json")],
        { log },
      );
      reference = JSON.parse(await readFile(join(work, "reference.json"), "utf8")) as Reference;
      log(
        `reference (${Object.entries(reference.versions)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}) ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
    },
    { timeout: 30 * 60_000 },
  );

  after(async () => {
    if (figures.length > 0) log(`\nparity (lowest cosine over ${sentences.length} sentences):\n${figures.join("\n")}`);
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("declares the model cards' pooling, length, prompts and normalisation in each manifest", () => {
    for (const m of MAVEN_EMBEDDERS) {
      const spec = specs.get(m.id)!;
      const want = card(m.id);
      assert.equal(spec.origin, "pretrained", m.id);
      assert.equal(spec.pooling, want.pooling, m.id);
      assert.equal(spec.maxSequenceLength, want.maxLength, m.id);
      assert.equal(spec.normalize, true, m.id);
      assert.equal(spec.dimensions, 384, m.id);
      assert.equal(spec.matryoshka, false, m.id);
      assert.deepEqual(spec.prompts, { query: want.query, passage: want.passage }, m.id);
    }
    assert.equal(card("bge-small-en-v1.5").query, BGE_QUERY_INSTRUCTION);
  });

  for (const m of MAVEN_EMBEDDERS) {
    it(`${m.id}: same token ids, and every vector within the bound, alone or padded in one batch`, async () => {
      const spec = specs.get(m.id)!;
      const ref = reference.models[m.id]!;
      const tokenizer = await createTextTokenizer(spec);
      const prompt = spec.prompts.query ?? "";
      const ids = sentences.map((s) => tokenizer.encode(prompt + s, { truncate: true }).ids);
      for (const [i, got] of ids.entries()) {
        assert.deepEqual(Array.from(got), ref.inputIds[i], `${m.id} sentence ${i}: ${JSON.stringify(sentences[i]!.slice(0, 60))}`);
      }
      const threads = await createInferenceThreads({ spec, intraOpThreads: 2 });
      try {
        const all = sentences.map((_, i) => i);
        const layouts = { alone: all.map((i) => [i]), padded: [all] };
        const lows: string[] = [];
        const failures: string[] = [];
        let vectors: Float32Array[] = [];
        let alone: Float32Array[] = [];
        for (const [layout, groups] of Object.entries(layouts)) {
          const out = await threads.run(groups.map((g) => ({ ids: g.map((i) => ids[i]!) })));
          l2normalize(out.vectors, spec.dimensions);
          vectors = groups.flat().map((_, row) => out.vectors.slice(row * spec.dimensions, (row + 1) * spec.dimensions));
          if (layout === "alone") alone = vectors;
          const cosines = vectors.map((v, i) => cosine(v, ref.embeddings[i]!));
          const worst = Math.min(...cosines);
          lows.push(`${layout} ${worst > 0.9999 ? `1 - ${(1 - worst).toExponential(1)}` : worst.toFixed(4)}`);
          // Dynamic int8 quantisation scales activations per tensor, over the whole batch padding
          // included, so a padded batch moves a quantized model's vectors (not an fp32 one's).
          const bound = m.quantized && layout === "padded" ? MIN_COSINE_QUANTIZED_PADDED : MIN_COSINE;
          failures.push(...cosines.flatMap((c, i) => (c >= bound ? [] : [`${layout}, sentence ${i}: cosine ${c} < ${bound}`])));
        }
        let line = `  ${m.id.padEnd(20)} vs same ONNX in Python: ${lows.join(", ")}`;
        if (m.quantized) {
          const fp32 = reference.models[m.id.replace(/-q$/, "")]!;
          const cosines = alone.map((v, i) => cosine(v, fp32.embeddings[i]!));
          const worst = Math.min(...cosines);
          line += `; vs fp32 ${worst.toFixed(4)} (mean ${(cosines.reduce((a, b) => a + b, 0) / cosines.length).toFixed(4)})`;
          failures.push(...cosines.flatMap((c, i) => (c >= MIN_COSINE_QUANTIZED ? [] : [`vs fp32, sentence ${i}: cosine ${c}`])));
        }
        figures.push(line);
        assert.deepEqual(failures, [], m.id);
        for (const [a, near, far] of related) {
          const margin = cosine(vectors[a]!, vectors[near]!) - cosine(vectors[a]!, vectors[far]!);
          assert.ok(margin >= MIN_MARGIN, `${m.id}: "${sentences[a]}" related minus unrelated ${margin.toFixed(3)}`);
        }
      } finally {
        await threads.close();
      }
    });
  }
});
