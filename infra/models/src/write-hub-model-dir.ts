/**
 * Lays out a generated preset as a Hugging Face Hub repository, the way `transformers`,
 * sentence-transformers and `optimum` save one: config.json, tokenizer files, the
 * sentence-transformers module files, and the ONNX export under onnx/. No shoal-model.json: the
 * runtime must derive everything from these files (issue #48). Options pick the layouts the
 * derivation must handle, including repositories it must refuse.
 *
 * The weights are the preset's (same seed, same bytes as writeModelDir's model.onnx), so a
 * repository written here and the classic directory of the same preset compute the same vectors.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { buildBertGraph, type BuiltGraph } from "./bert-graph.ts";
import type { BertPreset } from "./presets.ts";
import { GENERATOR_NAME, GENERATOR_VERSION } from "./presets.ts";
import { buildTokenizerConfig, buildTokenizerJson } from "./tokenizer-json.ts";
import { buildVocab } from "./vocab.ts";

/** How sentence-transformers' CrossEncoder recorded its activation, by version. */
export type CrossEncoderStyle =
  /** A plain `transformers` *ForSequenceClassification save: no CrossEncoder config. */
  | "none"
  /** sentence-transformers < 4: config.json `sbert_ce_default_activation_function`. */
  | "v3"
  /** sentence-transformers 4 and 5: config.json `sentence_transformers: { activation_fn, version }`. */
  | "v4"
  /** sentence-transformers 6: config_sentence_transformers.json `{ model_type: "CrossEncoder", activation_fn }`. */
  | "v6";

/** Options of {@link writeHubModelDir}. Every field is optional; the defaults give a sentence-transformers embedder (or a plain head). */
export interface HubModelDirOptions {
  /** Embedders: `sentence-transformers` (modules.json, 1_Pooling, ...; default) or `plain` (config.json + tokenizer + ONNX only). */
  readonly layout?: "sentence-transformers" | "plain";
  /** Embedders, sentence-transformers layout: the Pooling module's mode (default the preset's). */
  readonly pooling?: "mean" | "cls" | "lasttoken" | "max";
  /** `legacy` (`pooling_mode_mean_tokens: true`..., default: what most Hub repositories carry) or `current` (`pooling_mode: "mean"`). */
  readonly poolingConfigStyle?: "legacy" | "current";
  /** Embedders, sentence-transformers layout: a Normalize module (default the preset's `normalize`). */
  readonly normalize?: boolean;
  /** config_sentence_transformers.json `prompts` (e.g. `{ query: "query: ", passage: "passage: " }`). */
  readonly prompts?: Readonly<Record<string, string>>;
  readonly defaultPromptName?: string;
  /** config_sentence_transformers.json `similarity_fn_name` (default `cosine`). */
  readonly similarityFnName?: string;
  /** sentence_bert_config.json `max_seq_length`; omitted when undefined (default the preset's maxSequenceLength). */
  readonly maxSeqLength?: number | null;
  /** tokenizer_config.json `model_max_length`; `null` writes transformers' 1e30 "unset" sentinel (default the preset's maxSequenceLength). */
  readonly modelMaxLength?: number | null;
  /** config.json `max_position_embeddings` (default the preset's). Only recorded: the graph keeps the preset's table. */
  readonly maxPositionEmbeddings?: number;
  /**
   * Where the ONNX export goes: `onnx/model.onnx` (default, optimum's layout), `model.onnx` (the
   * root, older exports), or `none` (a safetensors-only repository).
   */
  readonly onnx?: "onnx/model.onnx" | "model.onnx" | "none";
  /** Extra copies under onnx/model_<variant>.onnx (e.g. `qint8_avx512`): the same graph, not really quantised. */
  readonly onnxVariants?: readonly string[];
  /** Write a model.safetensors (a valid header, no tensors: enough for the refusal and sidecar-spec paths; not loadable). Default: when `onnx` is `none`. */
  readonly safetensors?: boolean;
  /** Heads with one label: how the CrossEncoder config is written (default `v4`). */
  readonly crossEncoder?: CrossEncoderStyle;
  /** false: leave tokenizer.json out (tokenizer_config.json and vocab.txt stay). */
  readonly tokenizer?: boolean;
  /** Replaces config.json `architectures[0]` (e.g. a `*ForTokenClassification` Shoal must refuse). */
  readonly architecture?: string;
}

/** What {@link writeHubModelDir} wrote. */
export interface HubModelDirResult {
  readonly dir: string;
  /** Relative paths of the files written, sorted. */
  readonly files: readonly string[];
}

/** transformers writes int(1e30) when a tokenizer has no length limit. */
const UNSET_MODEL_MAX_LENGTH = "1000000000000000019884624838656";
const ACTIVATION_FN = { sigmoid: "torch.nn.modules.activation.Sigmoid", none: "torch.nn.modules.linear.Identity" } as const;
const ST_VERSION = "6.0.0";
const graphs = new Map<string, BuiltGraph>();

/** The preset's graph, built once per process: several layouts of one preset share it. */
function graphOf(preset: BertPreset): BuiltGraph {
  const key = JSON.stringify(preset);
  let g = graphs.get(key);
  if (g === undefined) {
    g = buildBertGraph(preset);
    graphs.set(key, g);
  }
  return g;
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** A safetensors file holding no tensors: 8-byte little-endian header length, then the JSON header. */
function emptySafetensors(): Uint8Array {
  const header = Buffer.from(JSON.stringify({ __metadata__: { format: "pt", note: `${GENERATOR_NAME} placeholder: no tensors` } }).padEnd(64, " "));
  const out = Buffer.alloc(8 + header.length);
  out.writeBigUInt64LE(BigInt(header.length), 0);
  header.copy(out, 8);
  return out;
}

function configJson(preset: BertPreset, o: HubModelDirOptions): Record<string, unknown> {
  const head = preset.head;
  const arch = o.architecture ?? (head === undefined ? "BertModel" : "BertForSequenceClassification");
  const config: Record<string, unknown> = {
    architectures: [arch],
    model_type: "bert",
    attention_probs_dropout_prob: 0.1,
    hidden_act: "gelu",
    hidden_dropout_prob: 0.1,
    hidden_size: preset.hidden,
    initializer_range: preset.initializerRange,
    intermediate_size: preset.intermediate,
    layer_norm_eps: preset.layerNormEpsilon,
    max_position_embeddings: o.maxPositionEmbeddings ?? preset.maxPositionEmbeddings,
    num_attention_heads: preset.heads,
    num_hidden_layers: preset.layers,
    pad_token_id: 0,
    type_vocab_size: preset.typeVocabSize,
    vocab_size: preset.vocabSize,
    transformers_version: "4.57.1",
    shoal_generator: { generator: GENERATOR_NAME, generatorVersion: GENERATOR_VERSION, preset: preset.name, seed: preset.seed },
  };
  if (head === undefined) return config;
  const labels = head.task === "rerank" ? ["LABEL_0"] : head.labels;
  config["id2label"] = Object.fromEntries(labels.map((l, i) => [String(i), l]));
  config["label2id"] = Object.fromEntries(labels.map((l, i) => [l, i]));
  if (head.task === "classify") {
    config["problem_type"] = head.problemType === "multi_label" ? "multi_label_classification" : "single_label_classification";
    return config;
  }
  const style = o.crossEncoder ?? "v4";
  const fn = ACTIVATION_FN[head.scoreActivation];
  if (style === "v3") config["sbert_ce_default_activation_function"] = fn;
  if (style === "v4") config["sentence_transformers"] = { activation_fn: fn, version: "4.1.0" };
  return config;
}

function poolingConfig(dim: number, mode: string, style: "legacy" | "current"): Record<string, unknown> {
  if (style === "current") return { embedding_dimension: dim, pooling_mode: mode, include_prompt: true };
  return {
    word_embedding_dimension: dim,
    pooling_mode_cls_token: mode === "cls",
    pooling_mode_mean_tokens: mode === "mean",
    pooling_mode_max_tokens: mode === "max",
    pooling_mode_mean_sqrt_len_tokens: false,
    pooling_mode_weightedmean_tokens: false,
    pooling_mode_lasttoken: mode === "lasttoken",
    include_prompt: true,
  };
}

/**
 * Writes `preset` into `dir` as a Hub repository laid out per `options` (see
 * {@link HubModelDirOptions}). Embedder presets get a sentence-transformers layout by default;
 * presets with a head get a `BertForSequenceClassification` config (a cross-encoder for one
 * label, in the CrossEncoder style asked for).
 */
export async function writeHubModelDir(dir: string, preset: BertPreset, options: HubModelDirOptions = {}): Promise<HubModelDirResult> {
  const files: string[] = [];
  const write = async (name: string, data: Uint8Array | string): Promise<void> => {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), data);
    files.push(name);
  };
  await mkdir(dir, { recursive: true });
  const head = preset.head;
  await write("config.json", json(configJson(preset, options)));

  const vocab = buildVocab(preset.vocabSize);
  if (options.tokenizer !== false) await write("tokenizer.json", json(buildTokenizerJson(vocab)));
  await write("vocab.txt", `${vocab.join("\n")}\n`);
  const modelMax = options.modelMaxLength === undefined ? preset.maxSequenceLength : options.modelMaxLength;
  const tokConfig = json(buildTokenizerConfig(modelMax ?? 1e30));
  await write(
    "tokenizer_config.json",
    modelMax === null ? tokConfig.replace(/"model_max_length": 1e\+30/, `"model_max_length": ${UNSET_MODEL_MAX_LENGTH}`) : tokConfig,
  );
  await write("special_tokens_map.json", json({ cls_token: "[CLS]", mask_token: "[MASK]", pad_token: "[PAD]", sep_token: "[SEP]", unk_token: "[UNK]" }));

  const stConfig: Record<string, unknown> = {
    __version__: { sentence_transformers: ST_VERSION, transformers: "4.57.1", pytorch: "2.9.0" },
    prompts: { ...options.prompts },
    default_prompt_name: options.defaultPromptName ?? null,
  };
  if (head === undefined && (options.layout ?? "sentence-transformers") === "sentence-transformers") {
    const normalize = options.normalize ?? preset.normalize;
    const modules = [
      { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
      { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
      ...(normalize ? [{ idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" }] : []),
    ];
    await write("modules.json", json(modules));
    await write("1_Pooling/config.json", json(poolingConfig(preset.hidden, options.pooling ?? preset.pooling, options.poolingConfigStyle ?? "legacy")));
    if (normalize) await mkdir(join(dir, "2_Normalize"), { recursive: true });
    const maxSeq = options.maxSeqLength === undefined ? preset.maxSequenceLength : options.maxSeqLength;
    await write("sentence_bert_config.json", json(maxSeq === null ? { do_lower_case: false } : { max_seq_length: maxSeq, do_lower_case: false }));
    await write(
      "config_sentence_transformers.json",
      json({ model_type: "SentenceTransformer", ...stConfig, similarity_fn_name: options.similarityFnName ?? "cosine" }),
    );
  } else if (head?.task === "rerank" && options.crossEncoder === "v6") {
    await write("config_sentence_transformers.json", json({ model_type: "CrossEncoder", ...stConfig, activation_fn: ACTIVATION_FN[head.scoreActivation] }));
  }

  const onnx = options.onnx ?? "onnx/model.onnx";
  const variants = options.onnxVariants ?? [];
  if (onnx !== "none" || variants.length > 0) {
    const { bytes } = graphOf(preset);
    if (onnx !== "none") await write(onnx, bytes);
    for (const v of variants) await write(`onnx/model_${v}.onnx`, bytes);
  }
  if (options.safetensors ?? onnx === "none") await write("model.safetensors", emptySafetensors());
  return { dir, files: files.sort() };
}
