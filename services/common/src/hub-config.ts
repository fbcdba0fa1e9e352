/**
 * What a Hugging Face Hub repository's JSON files say about serving it: task, pooling,
 * normalisation, prompts, maximum length, labels, score activation. Pure functions over the
 * parsed files; hub-layout.ts reads them and joins the ONNX graph's signature. The rules and their
 * precedence are documented in infra/models/README.md ("Hugging Face layout").
 */
import { isJsonObject, type JsonObject } from "./json.ts";
import type { EmbedPrompts, ModelTask, Pooling, ProblemType, ScoreActivation } from "./model-manifest.ts";

/** The repository's JSON files, parsed; undefined where the file is absent. */
export interface HubFiles {
  readonly config: JsonObject;
  /** sentence-transformers' modules.json: `[{ idx, name, path, type }]`. */
  readonly modules: readonly JsonObject[] | undefined;
  /** The Pooling module's config.json and its path (`1_Pooling/config.json`). */
  readonly pooling: { readonly path: string; readonly config: JsonObject } | undefined;
  readonly sentenceBertConfig: JsonObject | undefined;
  readonly sentenceTransformersConfig: JsonObject | undefined;
  readonly tokenizerConfig: JsonObject | undefined;
}

/** The task-independent result plus the fields of the task found. */
export interface HubDerivation {
  readonly architecture: string;
  readonly task: ModelTask;
  readonly maxSequenceLength: number;
  /** Which file and field gave `maxSequenceLength`. */
  readonly maxSequenceLengthFrom: string;
  readonly hiddenSize: number | undefined;
  /** From config.json `type_vocab_size`: > 1 means the model takes token types. */
  readonly typeVocabSize: number | undefined;
  /** Embedders: pooling of token vectors as configured (the graph may already pool). */
  readonly pooling: Exclude<Pooling, "none">;
  readonly poolingFrom: string;
  readonly poolingDimension: number | undefined;
  readonly normalize: boolean;
  /** A Dense module follows pooling: only a graph that outputs `sentence_embedding` includes it. */
  readonly denseModule: string | undefined;
  readonly prompts: EmbedPrompts;
  readonly allPrompts: Readonly<Record<string, string>>;
  readonly defaultPrompt: string | undefined;
  readonly similarity: string;
  /** Heads. */
  readonly labels: readonly string[];
  readonly problemType: ProblemType;
  readonly scoreActivation: ScoreActivation;
  /** `transformers` (a *ForSequenceClassification config) or `sentence-transformers CrossEncoder`. */
  readonly headFrom: string | undefined;
}

/** transformers' "no limit" `model_max_length` (int(1e30)); any value this large means unset. */
const HUGE_MAX_LENGTH = 1e29;
/** Families whose position ids start after the padding index: usable positions = max_position_embeddings - pad_token_id - 1. */
const OFFSET_POSITIONS = new Set(["roberta", "xlm-roberta", "camembert", "longformer", "mpnet", "ibert", "bart"]);
const ST_POOLING: Readonly<Record<string, Exclude<Pooling, "none">>> = { mean: "mean", cls: "cls", lasttoken: "lasttoken" };
const LEGACY_POOLING_KEYS: Readonly<Record<string, string>> = {
  pooling_mode_cls_token: "cls",
  pooling_mode_mean_tokens: "mean",
  pooling_mode_max_tokens: "max",
  pooling_mode_mean_sqrt_len_tokens: "mean_sqrt_len_tokens",
  pooling_mode_weightedmean_tokens: "weightedmean",
  pooling_mode_lasttoken: "lasttoken",
};
const ACTIVATIONS: Readonly<Record<string, ScoreActivation>> = {
  "torch.nn.modules.activation.Sigmoid": "sigmoid",
  "torch.nn.modules.linear.Identity": "none",
};

const positiveInt = (v: unknown): number | undefined => (typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : undefined);
const show = (v: unknown): string => JSON.stringify(v) ?? "undefined";

/** The last segment of a module type (`sentence_transformers.models.Pooling` → `Pooling`). */
export function moduleKind(m: JsonObject): string {
  return typeof m["type"] === "string" ? (m["type"].split(".").at(-1) ?? "") : "";
}

/**
 * Derives everything but the ONNX signature. Problems name `file: field: why`.
 * @returns the derivation (meaningless when problems is non-empty) and every problem found
 */
export function deriveFromHubFiles(files: HubFiles): { derivation: HubDerivation; problems: string[] } {
  const problems: string[] = [];
  const { config } = files;
  const st = files.sentenceTransformersConfig;
  const architecture = readArchitecture(files, problems);
  const task = readTask(files, architecture, problems);
  const heads = readHead(files, task, problems);
  const emb = task === "embed" ? readEmbedder(files, problems) : undefined;
  const { maxSequenceLength, maxSequenceLengthFrom } = readMaxLength(files, problems);
  const rawPrompts = isJsonObject(st?.["prompts"]) ? st["prompts"] : {};
  const allPrompts: Record<string, string> = {};
  for (const [k, v] of Object.entries(rawPrompts)) {
    if (typeof v === "string") allPrompts[k] = v;
    else problems.push(`config_sentence_transformers.json: prompts.${k}: must be a string (got ${show(v)})`);
  }
  // sentence-transformers names the searched side `passage` (E5) or `document` (newer cards); an
  // empty prompt means "none" (Shoal's manifest refuses empty strings).
  const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === "" ? undefined : v);
  const prompts = { query: nonEmpty(allPrompts["query"]), passage: nonEmpty(allPrompts["passage"] ?? allPrompts["document"]) };
  const defaultPrompt = typeof st?.["default_prompt_name"] === "string" ? st["default_prompt_name"] : undefined;
  if (defaultPrompt !== undefined && allPrompts[defaultPrompt] === undefined) {
    problems.push(`config_sentence_transformers.json: default_prompt_name: "${defaultPrompt}" is not one of its prompts`);
  }
  const derivation: HubDerivation = {
    architecture,
    task,
    maxSequenceLength,
    maxSequenceLengthFrom,
    hiddenSize: positiveInt(config["hidden_size"]) ?? positiveInt(config["d_model"]) ?? positiveInt(config["dim"]),
    typeVocabSize: typeof config["type_vocab_size"] === "number" ? config["type_vocab_size"] : undefined,
    pooling: emb?.pooling ?? "mean",
    poolingFrom: emb?.poolingFrom ?? "",
    poolingDimension: emb?.dimension,
    normalize: emb?.normalize ?? false,
    denseModule: emb?.dense,
    prompts,
    allPrompts,
    defaultPrompt,
    similarity: typeof st?.["similarity_fn_name"] === "string" ? st["similarity_fn_name"] : "cosine",
    ...heads,
  };
  return { derivation, problems };
}

function readArchitecture(files: HubFiles, problems: string[]): string {
  const archs = files.config["architectures"];
  if (Array.isArray(archs) && typeof archs[0] === "string") return archs[0];
  // A sentence-transformers folder says what it is even when config.json does not.
  if (files.modules !== undefined) return "";
  problems.push(`config.json: architectures: missing (got ${show(archs)}); Shoal derives the task from it`);
  return "";
}

/**
 * `*ForSequenceClassification` is a head (one label: rerank, more: classify); `*Model`,
 * `*ForMaskedLM` (an encoder saved with its pre-training head) are embedders, and so is
 * `*ForCausalLM` inside a sentence-transformers layout (last-token embedders). Anything else is
 * refused: Shoal cannot tell what its outputs mean.
 */
function readTask(files: HubFiles, arch: string, problems: string[]): ModelTask {
  const crossEncoder = files.sentenceTransformersConfig?.["model_type"] === "CrossEncoder";
  if (arch.endsWith("ForSequenceClassification") || crossEncoder) {
    const n = labelNames(files.config).length;
    return n <= 1 ? "rerank" : "classify";
  }
  if (arch === "" || /(Model|ForMaskedLM)$/.test(arch)) return "embed";
  if (arch.endsWith("ForCausalLM") && files.modules !== undefined) return "embed";
  const why = arch.endsWith("ForCausalLM")
    ? "a causal LM without sentence-transformers' modules.json (nothing says how to pool it)"
    : "not an encoder (*Model, *ForMaskedLM) nor a *ForSequenceClassification head";
  problems.push(`config.json: architectures: unknown architecture "${arch}": ${why}`);
  return "embed";
}

/** Label names in logit order from `id2label` (keys "0".."n-1"), else `num_labels` defaults. */
function labelNames(config: JsonObject): string[] {
  const id2label = config["id2label"];
  if (isJsonObject(id2label)) {
    const names: string[] = [];
    for (const [k, v] of Object.entries(id2label)) names[Number(k)] = String(v);
    return names;
  }
  const n = positiveInt(config["num_labels"]) ?? 2; // transformers' default
  return Array.from({ length: n }, (_, i) => `LABEL_${i}`);
}

type HeadFields = Pick<HubDerivation, "labels" | "problemType" | "scoreActivation" | "headFrom">;

function readHead(files: HubFiles, task: ModelTask, problems: string[]): HeadFields {
  const { config } = files;
  const none: HeadFields = { labels: [], problemType: "single_label", scoreActivation: "sigmoid", headFrom: undefined };
  if (task === "embed") return none;
  const labels = labelNames(config);
  // Spread turns the holes of a sparse array (a missing key) into undefined.
  const holes = [...labels].some((l) => l === undefined);
  if (holes || labels.length === 0) problems.push(`config.json: id2label: keys must be 0..n-1 (got ${show(config["id2label"])})`);
  const num = positiveInt(config["num_labels"]);
  if (num !== undefined && num !== labels.length) problems.push(`config.json: num_labels: ${num} but id2label names ${labels.length}`);
  const problemTypeRaw = config["problem_type"];
  if (task === "classify") {
    let problemType: ProblemType = "single_label";
    if (problemTypeRaw === "multi_label_classification") problemType = "multi_label";
    else if (problemTypeRaw !== undefined && problemTypeRaw !== null && problemTypeRaw !== "single_label_classification") {
      problems.push(`config.json: problem_type: ${show(problemTypeRaw)} with ${labels.length} labels is not a classifier Shoal serves`);
    }
    return { ...none, labels, problemType, headFrom: "config.json id2label" };
  }
  // sentence-transformers stores the CrossEncoder's activation in config_sentence_transformers.json
  // (v6: `activation_fn`), in config.json's `sentence_transformers.activation_fn` (v4, v5), or in
  // config.json's `sbert_ce_default_activation_function` (< v4). Absent: Sigmoid for one label.
  const st = files.sentenceTransformersConfig;
  const stBlock = isJsonObject(config["sentence_transformers"]) ? config["sentence_transformers"] : undefined;
  const candidates: [string, unknown][] = [
    ["config_sentence_transformers.json: activation_fn", st?.["activation_fn"]],
    ["config.json: sentence_transformers.activation_fn", stBlock?.["activation_fn"]],
    ["config.json: sbert_ce_default_activation_function", config["sbert_ce_default_activation_function"]],
  ];
  const found = candidates.find(([, v]) => v !== undefined && v !== null);
  let scoreActivation: ScoreActivation = "sigmoid";
  if (found !== undefined) {
    const act = typeof found[1] === "string" ? ACTIVATIONS[found[1]] : undefined;
    if (act === undefined) problems.push(`${found[0]}: ${show(found[1])} is not Sigmoid or Identity, the score activations Shoal applies`);
    else scoreActivation = act;
  }
  const crossEncoder = found !== undefined || st?.["model_type"] === "CrossEncoder";
  return { ...none, labels, scoreActivation, headFrom: crossEncoder ? "sentence-transformers CrossEncoder" : "config.json num_labels = 1" };
}

interface EmbedFields {
  pooling: Exclude<Pooling, "none">;
  poolingFrom: string;
  dimension: number | undefined;
  normalize: boolean;
  dense: string | undefined;
}

/** Pooling and normalisation from modules.json + the Pooling config; a plain encoder gets mean pooling, unnormalised. */
function readEmbedder(files: HubFiles, problems: string[]): EmbedFields {
  if (files.modules === undefined) {
    return { pooling: "mean", poolingFrom: "default for a plain encoder (no modules.json)", dimension: undefined, normalize: false, dense: undefined };
  }
  const kinds = files.modules.map(moduleKind);
  const normalize = kinds.includes("Normalize");
  const denseAt = kinds.indexOf("Dense");
  const dense = denseAt >= 0 ? String(files.modules[denseAt]?.["path"] ?? "Dense") : undefined;
  for (const [i, k] of kinds.entries()) {
    if (!["Transformer", "Pooling", "Normalize", "Dense"].includes(k)) {
      problems.push(`modules.json: [${i}].type: ${show(files.modules[i]?.["type"])} is not a module Shoal runs (Transformer, Pooling, Normalize)`);
    }
  }
  if (files.pooling === undefined) {
    if (kinds.includes("Pooling")) problems.push("modules.json: the Pooling module's config.json is missing");
    return { pooling: "mean", poolingFrom: "default (modules.json has no Pooling config)", dimension: undefined, normalize, dense };
  }
  const { path, config } = files.pooling;
  const dimension = positiveInt(config["embedding_dimension"]) ?? positiveInt(config["word_embedding_dimension"]);
  if (config["include_prompt"] === false) {
    problems.push(`${path}: include_prompt: false (prompt tokens left out of pooling) is not supported`);
  }
  // Newer sentence-transformers write `pooling_mode: "mean"`; older ones one boolean per mode.
  let modes: string[];
  let field = "pooling_mode";
  if (config["pooling_mode"] !== undefined) {
    const m = config["pooling_mode"];
    modes = typeof m === "string" ? [m] : Array.isArray(m) ? m.map(String) : [show(m)];
  } else {
    const on = Object.keys(LEGACY_POOLING_KEYS).filter((k) => config[k] === true);
    field = on.join(" + ") || "pooling_mode_*";
    modes = on.map((k) => LEGACY_POOLING_KEYS[k]!);
    if (modes.length === 0) modes = ["mean"]; // sentence-transformers' own fallback
  }
  const pooling = modes.length === 1 ? ST_POOLING[modes[0]!] : undefined;
  if (pooling === undefined) {
    problems.push(`${path}: ${field}: ${modes.join(" + ")} pooling is not supported (Shoal pools mean, cls or lasttoken, one at a time)`);
  }
  return { pooling: pooling ?? "mean", poolingFrom: `${path} ${field}`, dimension, normalize, dense };
}

/**
 * Max length, first found of: sentence_bert_config.json `max_seq_length` (what
 * sentence-transformers truncates to), tokenizer_config.json `model_max_length` (unless it is
 * transformers' 1e30 "unset"), config.json `max_position_embeddings`; never more than the
 * positions the model has (max_position_embeddings, less the padding offset of RoBERTa-like models).
 */
function readMaxLength(files: HubFiles, problems: string[]): { maxSequenceLength: number; maxSequenceLengthFrom: string } {
  const { config } = files;
  const modelType = typeof config["model_type"] === "string" ? config["model_type"] : "";
  const positionsRaw = positiveInt(config["max_position_embeddings"]);
  const offset = OFFSET_POSITIONS.has(modelType) ? (positiveInt(config["pad_token_id"]) ?? 1) + 1 : 0;
  const positions = positionsRaw === undefined ? undefined : positionsRaw - offset;
  const tmLength = files.tokenizerConfig?.["model_max_length"];
  const candidates: [string, number | undefined][] = [
    ["sentence_bert_config.json max_seq_length", positiveInt(files.sentenceBertConfig?.["max_seq_length"])],
    ["tokenizer_config.json model_max_length", typeof tmLength === "number" && tmLength < HUGE_MAX_LENGTH ? positiveInt(tmLength) : undefined],
    [`config.json max_position_embeddings${offset > 0 ? ` - ${offset} (${modelType} position offset)` : ""}`, positions],
  ];
  const found = candidates.find(([, v]) => v !== undefined);
  if (found === undefined) {
    problems.push(
      "config.json: max_position_embeddings: missing, and neither sentence_bert_config.json max_seq_length nor tokenizer_config.json model_max_length says a max length",
    );
    return { maxSequenceLength: 0, maxSequenceLengthFrom: "" };
  }
  const [from, value] = found as [string, number];
  if (positions !== undefined && value > positions) {
    return { maxSequenceLength: positions, maxSequenceLengthFrom: `${from} (${value}), capped at config.json max_position_embeddings` };
  }
  return { maxSequenceLength: value, maxSequenceLengthFrom: from };
}
