/**
 * readModelDir on generated models laid out as Hugging Face Hub repositories (no shoal-model.json):
 * one test per layout the derivation handles, asserting the spec's real values, and one per refusal.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { getPreset, type HubModelDirOptions, writeHubModelDir } from "@shoal/models";
import { hubSourceOf, type HubModelSource } from "./hub-layout.ts";
import { ModelLoadError } from "./model-load-error.ts";
import { type ModelSpec, readModelDir, type HubReadOptions } from "./model-manifest.ts";

let root: string;
let n = 0;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "shoal-hub-layout-test-"));
});
after(() => rm(root, { recursive: true, force: true }));

/** Writes a preset in Hub layout into a fresh folder named `name` and returns the folder. */
async function hubDir(preset: string, options: HubModelDirOptions = {}, name = `repo-${++n}`): Promise<string> {
  const dir = join(root, name);
  await writeHubModelDir(dir, getPreset(preset), options);
  return dir;
}

async function read(dir: string, options?: HubReadOptions): Promise<{ spec: ModelSpec; source: HubModelSource }> {
  const spec = await readModelDir(dir, options);
  const source = hubSourceOf(spec);
  assert.ok(source !== undefined, "a Hub-layout spec carries its Hub source");
  return { spec, source };
}

async function problems(dir: string, options?: HubReadOptions): Promise<readonly string[]> {
  try {
    await readModelDir(dir, options);
  } catch (err) {
    assert.ok(err instanceof ModelLoadError, `expected ModelLoadError, got ${String(err)}`);
    assert.equal(err.path, dir);
    return err.problems;
  }
  assert.fail("readModelDir resolved");
}

describe("readModelDir on a Hub layout: embedders", () => {
  it("sentence-transformers, mean pooling, Normalize, E5 prompts: everything from the repository's files", async () => {
    const dir = await hubDir("tiny", { prompts: { query: "query: ", passage: "passage: " }, defaultPromptName: "query", similarityFnName: "dot" }, "e5-like");
    const { spec, source } = await read(dir);
    assert.equal(spec.task, "embed");
    if (spec.task !== "embed") return;
    assert.equal(spec.id, "e5-like");
    assert.equal(spec.dimensions, 64);
    assert.equal(spec.pooling, "mean");
    assert.equal(spec.normalize, true);
    assert.equal(spec.maxSequenceLength, 128);
    assert.deepEqual(spec.prompts, { query: "query: ", passage: "passage: " });
    assert.equal(spec.modelPath, join(dir, "onnx", "model.onnx"));
    assert.equal(spec.tokenizerPath, join(dir, "tokenizer.json"));
    assert.equal(spec.outputName, "last_hidden_state");
    assert.deepEqual(spec.inputNames, { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: "token_type_ids" });
    assert.equal(spec.memoryBytes, undefined);
    assert.equal(spec.origin, "generated"); // config.json carries shoal_generator
    assert.deepEqual(source, {
      layout: "huggingface",
      architecture: "BertModel",
      runtime: "onnx",
      file: "onnx/model.onnx",
      similarity: "dot",
      defaultPrompt: "query",
      prompts: { query: "query: ", passage: "passage: " },
      poolingFrom: "1_Pooling/config.json pooling_mode_mean_tokens",
      maxSequenceLengthFrom: "sentence_bert_config.json max_seq_length",
      headFrom: undefined,
    });
    assert.ok(Object.isFrozen(spec) && Object.isFrozen(spec.source));
  });

  it("CLS pooling (current pooling_mode style), not normalised, no prompts", async () => {
    const { spec, source } = await read(await hubDir("tiny", { pooling: "cls", poolingConfigStyle: "current", normalize: false }));
    assert.equal(spec.pooling, "cls");
    assert.equal(spec.normalize, false);
    assert.ok(spec.task === "embed");
    assert.deepEqual(spec.prompts, { query: undefined, passage: undefined });
    assert.equal(source.poolingFrom, "1_Pooling/config.json pooling_mode");
    assert.equal(source.similarity, "cosine");
  });

  it("last-token pooling, and a `document` prompt read as the passage role", async () => {
    const { spec, source } = await read(await hubDir("tiny", { pooling: "lasttoken", prompts: { query: "Instruct: find\nQuery: ", document: "" } }));
    assert.equal(spec.pooling, "lasttoken");
    assert.ok(spec.task === "embed");
    assert.deepEqual(spec.prompts, { query: "Instruct: find\nQuery: ", passage: undefined });
    assert.equal(source.poolingFrom, "1_Pooling/config.json pooling_mode_lasttoken");
    assert.deepEqual(source.prompts, { query: "Instruct: find\nQuery: ", document: "" });
  });

  it("a plain encoder (no modules.json): mean pooling by default, not normalised, and the source says so", async () => {
    const { spec, source } = await read(await hubDir("tiny", { layout: "plain" }));
    assert.equal(spec.pooling, "mean");
    assert.equal(spec.normalize, false);
    assert.equal(source.poolingFrom, "default for a plain encoder (no modules.json)");
    assert.equal(spec.maxSequenceLength, 128);
    assert.equal(source.maxSequenceLengthFrom, "tokenizer_config.json model_max_length");
  });
});

describe("readModelDir on a Hub layout: max length from each of its three places", () => {
  it("sentence_bert_config.json max_seq_length first", async () => {
    const { spec, source } = await read(await hubDir("tiny", { maxSeqLength: 100, modelMaxLength: 120 }));
    assert.equal(spec.maxSequenceLength, 100);
    assert.equal(source.maxSequenceLengthFrom, "sentence_bert_config.json max_seq_length");
  });

  it("then tokenizer_config.json model_max_length", async () => {
    const { spec, source } = await read(await hubDir("tiny", { maxSeqLength: null, modelMaxLength: 96 }));
    assert.equal(spec.maxSequenceLength, 96);
    assert.equal(source.maxSequenceLengthFrom, "tokenizer_config.json model_max_length");
  });

  it("then config.json max_position_embeddings (transformers' 1e30 model_max_length ignored)", async () => {
    const { spec, source } = await read(await hubDir("tiny", { maxSeqLength: null, modelMaxLength: null, maxPositionEmbeddings: 64 }));
    assert.equal(spec.maxSequenceLength, 64);
    assert.equal(source.maxSequenceLengthFrom, "config.json max_position_embeddings");
  });

  it("never more than max_position_embeddings", async () => {
    const { spec, source } = await read(await hubDir("tiny", { maxSeqLength: 512 }));
    assert.equal(spec.maxSequenceLength, 128);
    assert.equal(source.maxSequenceLengthFrom, "sentence_bert_config.json max_seq_length (512), capped at config.json max_position_embeddings");
  });
});

describe("readModelDir on a Hub layout: heads", () => {
  for (const [style, from] of [
    ["none", "config.json num_labels = 1"],
    ["v3", "sentence-transformers CrossEncoder"],
    ["v4", "sentence-transformers CrossEncoder"],
    ["v6", "sentence-transformers CrossEncoder"],
  ] as const) {
    it(`a cross-encoder (CrossEncoder config style ${style}): rerank, one logit, sigmoid`, async () => {
      const { spec, source } = await read(await hubDir("tiny-rerank", { crossEncoder: style }));
      assert.equal(spec.task, "rerank");
      if (spec.task !== "rerank") return;
      assert.equal(spec.scoreActivation, "sigmoid");
      assert.equal(spec.dimensions, 1);
      assert.equal(spec.pooling, "none");
      assert.equal(spec.outputName, "logits");
      assert.equal(spec.hiddenSize, 64);
      assert.equal(source.headFrom, from);
    });
  }

  it("a cross-encoder whose CrossEncoder activation is Identity: raw logits", async () => {
    const preset = { ...getPreset("tiny-rerank"), head: { task: "rerank", scoreActivation: "none" } as const };
    const dir = join(root, "ce-identity");
    await writeHubModelDir(dir, preset, { crossEncoder: "v3" });
    const { spec } = await read(dir);
    assert.ok(spec.task === "rerank");
    assert.equal(spec.scoreActivation, "none");
  });

  it("a single-label classifier: id2label in logit order", async () => {
    const { spec, source } = await read(await hubDir("tiny-classify"));
    assert.equal(spec.task, "classify");
    if (spec.task !== "classify") return;
    assert.deepEqual(spec.labels, ["negative", "neutral", "positive"]);
    assert.equal(spec.problemType, "single_label");
    assert.equal(spec.dimensions, 3);
    assert.equal(source.headFrom, "config.json id2label");
  });

  it("a multi-label classifier: problem_type multi_label_classification", async () => {
    const { spec } = await read(await hubDir("tiny-multilabel"));
    assert.ok(spec.task === "classify");
    assert.deepEqual(spec.labels, ["sports", "politics", "technology", "science"]);
    assert.equal(spec.problemType, "multi_label");
  });
});

describe("readModelDir on a Hub layout: which file runs", () => {
  it("a named ONNX variant when asked, onnx/model.onnx otherwise", async () => {
    const dir = await hubDir("tiny", { onnxVariants: ["qint8_avx512"] });
    assert.equal((await read(dir)).spec.modelPath, join(dir, "onnx", "model.onnx"));
    const { spec, source } = await read(dir, { onnxVariant: "qint8_avx512" });
    assert.equal(spec.modelPath, join(dir, "onnx", "model_qint8_avx512.onnx"));
    assert.equal(source.file, "onnx/model_qint8_avx512.onnx");
    assert.deepEqual(await problems(dir, { onnxVariant: "O4" }), [
      'onnx/model_O4.onnx: not found (onnxVariant "O4"; the repository has onnx/model.onnx, onnx/model_qint8_avx512.onnx)',
    ]);
  });

  it("model.onnx at the root of older exports", async () => {
    const dir = await hubDir("tiny", { onnx: "model.onnx" });
    assert.equal((await read(dir)).spec.modelPath, join(dir, "model.onnx"));
  });

  it("safetensors only, for the sidecar: the spec is derived from config.json and the Pooling config", async () => {
    const dir = await hubDir("tiny", { onnx: "none" });
    const { spec, source } = await read(dir, { runtime: "sidecar" });
    assert.equal(spec.modelPath, join(dir, "model.safetensors"));
    assert.equal(spec.dimensions, 64);
    assert.equal(spec.pooling, "mean");
    assert.equal(spec.outputName, "last_hidden_state");
    assert.equal(spec.inputNames.tokenTypeIds, "token_type_ids"); // type_vocab_size 2
    assert.equal(source.runtime, "sidecar");
  });

  it("a shoal-model.json beside the Hub files overrides the derived fields it names", async () => {
    const dir = await hubDir("tiny");
    await writeFile(join(dir, "shoal-model.json"), JSON.stringify({ id: "my-embedder", normalize: false, prompts: { query: "q: " } }));
    const { spec, source } = await read(dir);
    assert.ok(spec.task === "embed");
    assert.equal(spec.id, "my-embedder");
    assert.equal(spec.normalize, false);
    assert.deepEqual(spec.prompts, { query: "q: ", passage: undefined });
    assert.equal(spec.pooling, "mean"); // still derived
    assert.equal(source.layout, "huggingface");
  });
});

describe("readModelDir on a Hub layout: refusals name the file and field", () => {
  it("no ONNX and no sidecar", async () => {
    assert.deepEqual(await problems(await hubDir("tiny", { onnx: "none" })), [
      "onnx/model.onnx: not found; the repository has model.safetensors only: set runtime: sidecar:pytorch or export ONNX with optimum-cli",
    ]);
  });

  it("an unknown architecture", async () => {
    assert.deepEqual(await problems(await hubDir("tiny", { architecture: "BertForTokenClassification", layout: "plain" })), [
      'config.json: architectures: unknown architecture "BertForTokenClassification": not an encoder (*Model, *ForMaskedLM) nor a *ForSequenceClassification head',
    ]);
  });

  it("a missing tokenizer.json", async () => {
    assert.deepEqual(await problems(await hubDir("tiny", { tokenizer: false })), [
      "tokenizer.json: not found (the repository has vocab.txt: save the tokenizer as a fast tokenizer to get tokenizer.json)",
    ]);
  });

  it("a pooling mode Shoal does not run, and every other problem with it", async () => {
    assert.deepEqual(await problems(await hubDir("tiny", { pooling: "max", tokenizer: false, onnx: "none", safetensors: false })), [
      "1_Pooling/config.json: pooling_mode_max_tokens: max pooling is not supported (Shoal pools mean, cls or lasttoken, one at a time)",
      "tokenizer.json: not found (the repository has vocab.txt: save the tokenizer as a fast tokenizer to get tokenizer.json)",
      "onnx/model.onnx: not found, nor model.onnx, nor any weights (model.safetensors, pytorch_model.bin)",
    ]);
  });
});
