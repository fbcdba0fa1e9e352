/**
 * Builds a Shoal manifest from a folder laid out as a Hugging Face Hub repository (config.json,
 * tokenizer.json, sentence-transformers' files, `onnx/model.onnx` or safetensors), so that such a
 * folder is served with no hand-written `shoal-model.json`. The manifest then goes through the
 * same validation as a hand-written one (model-manifest.ts). Rules: infra/models/README.md.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { deriveFromHubFiles, type HubDerivation, type HubFiles, moduleKind } from "./hub-config.ts";
import { isJsonObject, type JsonObject } from "./json.ts";
import type { ModelSpec } from "./model-manifest.ts";
import { ONNX_INT64, type OnnxGraphIo, type OnnxValueInfo, readOnnxGraphIo } from "./onnx-graph-io.ts";

/** File whose presence marks a folder as a Hub repository. */
export const HUB_CONFIG_FILE = "config.json";

/** How to read a Hub-layout folder. */
export interface HubReadOptions {
  /**
   * Serve another ONNX file than `onnx/model.onnx`: a variant name (`qint8_avx512` →
   * `onnx/model_qint8_avx512.onnx`) or a path inside the repository ending in `.onnx`.
   */
  readonly onnxVariant?: string;
  /**
   * `sidecar`: the weights run in a runtime sidecar (catalog `runtime: sidecar:pytorch`), so no
   * ONNX file is needed and the spec's `modelPath` is the weights file. Default `onnx`.
   */
  readonly runtime?: "onnx" | "sidecar";
  /** The model id; default the repository name (`models--org--name` cache folders give `name`) or the folder name. */
  readonly id?: string;
}

/** `spec.source` of a model derived from a Hub layout: what ListModels shows about it. */
export interface HubModelSource {
  readonly layout: "huggingface";
  /** config.json `architectures[0]` ("" when only modules.json says it is a sentence-transformers model). */
  readonly architecture: string;
  readonly runtime: "onnx" | "sidecar";
  /** Relative path of the ONNX file served (onnx runtime) or of the weights file (sidecar). */
  readonly file: string;
  /** sentence-transformers' `similarity_fn_name` (default `cosine`). */
  readonly similarity: string;
  /** sentence-transformers' `default_prompt_name`, if any. */
  readonly defaultPrompt: string | undefined;
  /** Every prompt the repository declares, by name. */
  readonly prompts: Readonly<Record<string, string>>;
  /** Where pooling came from (`1_Pooling/config.json pooling_mode_mean_tokens`, `graph output sentence_embedding`...); "" for heads. */
  readonly poolingFrom: string;
  /** Where `maxSequenceLength` came from. */
  readonly maxSequenceLengthFrom: string;
  /** What made the task a head (`sentence-transformers CrossEncoder`, `config.json id2label`); absent for embedders. */
  readonly headFrom: string | undefined;
}

/** The Hub provenance of a spec, or undefined for a spec read from shoal-model.json alone. */
export function hubSourceOf(spec: ModelSpec): HubModelSource | undefined {
  return spec.source?.["layout"] === "huggingface" ? (spec.source as unknown as HubModelSource) : undefined;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}

/** Parses `<dir>/<name>` if present; a present but unparsable file is a problem. */
async function readJson(dir: string, name: string, problems: string[]): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(join(dir, name), "utf8");
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    problems.push(`${name}: is not valid JSON (${(err as Error).message})`);
    return undefined;
  }
}

async function readObject(dir: string, name: string, problems: string[]): Promise<JsonObject | undefined> {
  const v = await readJson(dir, name, problems);
  if (v === undefined || isJsonObject(v)) return v;
  problems.push(`${name}: must be a JSON object`);
  return undefined;
}

async function readHubFiles(dir: string, problems: string[]): Promise<HubFiles> {
  const config = (await readObject(dir, HUB_CONFIG_FILE, problems)) ?? {};
  const rawModules = await readJson(dir, "modules.json", problems);
  let modules: JsonObject[] | undefined;
  if (rawModules !== undefined) {
    if (Array.isArray(rawModules) && rawModules.every(isJsonObject)) modules = rawModules;
    else problems.push("modules.json: must be a list of modules");
  }
  const poolingModule = modules?.find((m) => moduleKind(m) === "Pooling");
  let pooling: HubFiles["pooling"];
  if (poolingModule !== undefined) {
    const path = `${typeof poolingModule["path"] === "string" && poolingModule["path"] !== "" ? poolingModule["path"] : "1_Pooling"}/config.json`;
    const poolingConfig = await readObject(dir, path, problems);
    if (poolingConfig !== undefined) pooling = { path, config: poolingConfig };
  }
  return {
    config,
    modules,
    pooling,
    sentenceBertConfig: await readObject(dir, "sentence_bert_config.json", problems),
    sentenceTransformersConfig: await readObject(dir, "config_sentence_transformers.json", problems),
    tokenizerConfig: await readObject(dir, "tokenizer_config.json", problems),
  };
}

/** The repository name: `name` of a `models--org--name/snapshots/<sha>` cache folder, else the folder name. */
function defaultId(dir: string): string {
  const parent = dirname(dir);
  const repo = basename(dirname(parent));
  if (basename(parent) === "snapshots" && repo.startsWith("models--")) return repo.split("--").at(-1) ?? repo;
  return basename(dir);
}

/** The file an ONNX variant names: `qint8_avx512` is `onnx/model_qint8_avx512.onnx`; a path ending in `.onnx` is itself. */
export function onnxVariantFile(variant: string): string {
  return variant.endsWith(".onnx") ? variant : `onnx/model_${variant}.onnx`;
}

const WEIGHT_FILES = ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"];

/** The ONNX file to serve (relative), or a problem naming what is missing. */
async function pickOnnx(dir: string, options: HubReadOptions, problems: string[]): Promise<string | undefined> {
  const variant = options.onnxVariant;
  if (variant !== undefined) {
    const file = onnxVariantFile(variant);
    const rel = relative(dir, resolve(dir, file));
    if (isAbsolute(file) || rel.startsWith("..")) problems.push(`onnxVariant: ${JSON.stringify(variant)} must name a file inside the repository`);
    else if (await exists(join(dir, file))) return file;
    else {
      const onnx = await readdir(join(dir, "onnx")).catch(() => [] as string[]);
      const have = onnx.filter((f) => f.endsWith(".onnx")).map((f) => `onnx/${f}`);
      problems.push(`${file}: not found (onnxVariant ${JSON.stringify(variant)}; the repository has ${have.length > 0 ? have.join(", ") : "no onnx/*.onnx"})`);
    }
    return undefined;
  }
  for (const file of ["onnx/model.onnx", "model.onnx"]) if (await exists(join(dir, file))) return file;
  const weights = await presentWeights(dir);
  problems.push(
    weights.length > 0
      ? `onnx/model.onnx: not found; the repository has ${weights.join(", ")} only: set runtime: sidecar:pytorch or export ONNX with optimum-cli`
      : "onnx/model.onnx: not found, nor model.onnx, nor any weights (model.safetensors, pytorch_model.bin)",
  );
  return undefined;
}

async function presentWeights(dir: string): Promise<string[]> {
  const found = await Promise.all(WEIGHT_FILES.map(async (f) => ((await exists(join(dir, f))) ? f : undefined)));
  return found.filter((f) => f !== undefined);
}

interface GraphChoice {
  inputs: { inputIds: string; attentionMask: string; tokenTypeIds?: string };
  output: string;
  dimensions: number | undefined;
  pooledByGraph: boolean;
}

/** Input and output names from the graph; problems name the ONNX file. */
function chooseFromGraph(file: string, io: OnnxGraphIo, d: HubDerivation, problems: string[]): GraphChoice {
  const byName = new Map(io.inputs.map((i) => [i.name, i]));
  for (const name of ["input_ids", "attention_mask"]) {
    if (!byName.has(name)) problems.push(`${file}: graph input "${name}" is missing (inputs: ${io.inputs.map((i) => i.name).join(", ")})`);
  }
  for (const i of io.inputs) {
    if (!["input_ids", "attention_mask", "token_type_ids"].includes(i.name)) {
      problems.push(`${file}: graph input "${i.name}" is not one Shoal feeds (input_ids, attention_mask, token_type_ids)`);
    } else if (i.elemType !== ONNX_INT64) problems.push(`${file}: graph input "${i.name}" has element type ${i.elemType}; Shoal feeds int64 (7)`);
  }
  const inputs = {
    inputIds: "input_ids",
    attentionMask: "attention_mask",
    ...(byName.has("token_type_ids") ? { tokenTypeIds: "token_type_ids" } : {}),
  };
  const outputs = new Map(io.outputs.map((o) => [o.name, o]));
  const names = io.outputs.map((o) => o.name).join(", ");
  const lastDim = (o: OnnxValueInfo): number | undefined => (typeof o.shape?.at(-1) === "number" ? (o.shape.at(-1) as number) : undefined);
  if (d.task !== "embed") {
    const out = outputs.get("logits") ?? (io.outputs.length === 1 ? io.outputs[0] : undefined);
    if (out === undefined) {
      problems.push(`${file}: no "logits" output (outputs: ${names})`);
      return { inputs, output: "logits", dimensions: undefined, pooledByGraph: true };
    }
    const dims = lastDim(out);
    if (dims !== undefined && dims !== d.labels.length) {
      problems.push(`${file}: output "${out.name}" gives ${dims} logits but config.json id2label names ${d.labels.length} labels`);
    }
    return { inputs, output: out.name, dimensions: dims, pooledByGraph: true };
  }
  // sentence-transformers exports (optimum) carry the pooled, projected, normalised vector too.
  const pooled = outputs.get("sentence_embedding");
  if (pooled !== undefined) return { inputs, output: pooled.name, dimensions: lastDim(pooled), pooledByGraph: true };
  const rank3 = io.outputs.filter((o) => o.shape?.length === 3);
  const tokens = outputs.get("last_hidden_state") ?? outputs.get("token_embeddings") ?? (rank3.length === 1 ? rank3[0] : undefined);
  if (tokens === undefined) {
    problems.push(`${file}: no token-vector output to pool (expected last_hidden_state, token_embeddings or sentence_embedding; outputs: ${names})`);
    return { inputs, output: "last_hidden_state", dimensions: undefined, pooledByGraph: false };
  }
  if (d.denseModule !== undefined) {
    problems.push(
      `modules.json: ${d.denseModule}: a Dense projection after pooling is not in ${file}'s "${tokens.name}" output (export with a sentence_embedding output)`,
    );
  }
  return { inputs, output: tokens.name, dimensions: lastDim(tokens), pooledByGraph: false };
}

/**
 * A shoal-model.json laid over a derived manifest: its top-level fields replace the derived ones,
 * except `onnx` (and `onnx.inputs`) and `source`, which are merged field by field, so an override
 * can name just the output or add one provenance field.
 */
export function overlayManifest(derived: JsonObject, override: JsonObject): JsonObject {
  const out: JsonObject = { ...derived };
  for (const [key, value] of Object.entries(override)) {
    const base = derived[key];
    if ((key === "onnx" || key === "source") && isJsonObject(base) && isJsonObject(value)) {
      const merged: JsonObject = { ...base, ...value };
      if (isJsonObject(base["inputs"]) && isJsonObject(value["inputs"])) merged["inputs"] = { ...base["inputs"], ...value["inputs"] };
      out[key] = merged;
    } else out[key] = value;
  }
  return out;
}

/**
 * Reads a Hub-layout folder into a raw manifest (the shoal-model.json format), to be overlaid
 * with a shoal-model.json's fields and validated.
 * @returns the manifest (meaningless when problems is non-empty) and every problem, each naming
 *   the file and field at fault
 */
export async function deriveHubManifest(dir: string, options: HubReadOptions = {}): Promise<{ manifest: JsonObject; problems: string[] }> {
  const problems: string[] = [];
  const files = await readHubFiles(dir, problems);
  const { derivation: d, problems: configProblems } = deriveFromHubFiles(files);
  problems.push(...configProblems);
  if (!(await exists(join(dir, "tokenizer.json")))) {
    const slow = ["vocab.txt", "sentencepiece.bpe.model", "spiece.model", "vocab.json"];
    const have = (await Promise.all(slow.map(async (f) => ((await exists(join(dir, f))) ? f : undefined)))).filter((f) => f !== undefined);
    problems.push(
      `tokenizer.json: not found${have.length > 0 ? ` (the repository has ${have.join(", ")}: save the tokenizer as a fast tokenizer to get tokenizer.json)` : ""}`,
    );
  }

  const runtime = options.runtime ?? "onnx";
  let file: string | undefined;
  let choice: GraphChoice | undefined;
  if (runtime === "sidecar") {
    file = (await presentWeights(dir))[0];
    if (file === undefined) problems.push("model.safetensors: not found (the sidecar loads the repository's weights: model.safetensors or pytorch_model.bin)");
    if (d.denseModule !== undefined) problems.push(`modules.json: ${d.denseModule}: a Dense projection is not run by the sidecar`);
    const typed = (d.typeVocabSize ?? 0) > 1;
    choice = {
      inputs: { inputIds: "input_ids", attentionMask: "attention_mask", ...(typed ? { tokenTypeIds: "token_type_ids" } : {}) },
      output: d.task === "embed" ? "last_hidden_state" : "logits",
      dimensions: d.task === "embed" ? (d.poolingDimension ?? d.hiddenSize) : d.labels.length,
      pooledByGraph: d.task !== "embed",
    };
  } else {
    file = await pickOnnx(dir, options, problems);
    if (file !== undefined) {
      try {
        choice = chooseFromGraph(file, await readOnnxGraphIo(join(dir, file)), d, problems);
      } catch (err) {
        problems.push(`${file}: cannot read its graph (${(err as Error).message})`);
      }
    }
  }
  if (problems.length > 0 || choice === undefined || file === undefined) return { manifest: {}, problems };

  const dimensions = choice.dimensions ?? d.poolingDimension ?? d.hiddenSize;
  const source: HubModelSource = {
    layout: "huggingface",
    architecture: d.architecture,
    runtime,
    file,
    similarity: d.similarity,
    defaultPrompt: d.defaultPrompt,
    prompts: d.allPrompts,
    poolingFrom: d.task !== "embed" ? "" : choice.pooledByGraph ? `graph output ${choice.output}` : d.poolingFrom,
    maxSequenceLengthFrom: d.maxSequenceLengthFrom,
    headFrom: d.headFrom,
  };
  // Shoal's generator marks its Hub repositories: their weights are random, and ListModels says so.
  const origin = files.config["shoal_generator"] === undefined ? "pretrained" : "generated";
  const common = { formatVersion: 1, id: options.id ?? defaultId(dir), task: d.task };
  const rest = { onnx: { file, output: choice.output, inputs: choice.inputs }, tokenizer: "tokenizer.json", source, origin };
  if (d.task === "embed") {
    if (dimensions === undefined) problems.push("config.json: hidden_size: missing, and neither the graph output nor the Pooling config gives the vector size");
    const prompts = Object.fromEntries(Object.entries(d.prompts).filter(([, v]) => v !== undefined));
    return {
      manifest: {
        ...common,
        dimensions,
        maxSequenceLength: d.maxSequenceLength,
        pooling: choice.pooledByGraph ? "none" : d.pooling,
        normalize: d.normalize,
        ...(Object.keys(prompts).length > 0 ? { prompts } : {}),
        ...rest,
      },
      problems,
    };
  }
  const head = d.task === "rerank" ? { scoreActivation: d.scoreActivation } : { labels: [...d.labels], problemType: d.problemType };
  const hiddenSize = d.hiddenSize === undefined ? {} : { hiddenSize: d.hiddenSize };
  return { manifest: { ...common, maxSequenceLength: d.maxSequenceLength, ...head, ...hiddenSize, ...rest }, problems };
}
