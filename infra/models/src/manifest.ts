/** The `shoal-model.json` manifest of a Shoal model directory: its type, builder and parser. */

export const MANIFEST_FILE = "shoal-model.json";
export const MANIFEST_FORMAT_VERSION = 1;

export type Pooling = "mean" | "cls" | "none";
export type ScoreActivation = "sigmoid" | "none";
export type ProblemType = "single_label" | "multi_label";

/** Where a generated model came from (present on models written by this package). */
export interface GeneratedModelSource {
  generator: string;
  generatorVersion: number;
  preset: string;
  seed: number;
}

/** Fields of every task. */
interface ManifestBase {
  formatVersion: 1;
  /** Model id that requests name. */
  id: string;
  task: "embed" | "rerank" | "classify";
  /** Longest token sequence (including [CLS]/[SEP]) callers may send; for rerank, the whole pair. */
  maxSequenceLength: number;
  onnx: {
    file: string;
    output: string;
    inputs: { inputIds: string; attentionMask: string; tokenTypeIds?: string };
  };
  /** Hugging Face tokenizer.json, relative to the directory. */
  tokenizer: string;
  /** Estimated resident memory of a loaded session (weights x ~1.5). */
  memoryBytes: number;
  /** Provenance: GeneratedModelSource for generated models, free-form for imported ones. */
  source: GeneratedModelSource | Record<string, unknown>;
  /** `generated` (pseudo-random weights) or `pretrained`; readers derive it from `source.generator` when absent. */
  origin?: "generated" | "pretrained";
}

/** A sentence embedder. */
export interface EmbedManifest extends ManifestBase {
  task: "embed";
  /** Length of each output vector. */
  dimensions: number;
  /** How token vectors become one vector: masked mean, the first ([CLS]) token, or already pooled. */
  pooling: Pooling;
  /** L2-normalise the pooled vector. */
  normalize: boolean;
  /** Text put before each input by role (E5: `query: ` / `passage: `); absent roles get none. */
  prompts?: { query?: string; passage?: string };
  /** Trained so that vector prefixes are embeddings too (Matryoshka); default false. */
  matryoshka?: boolean;
}

/** A cross-encoder: `onnx.output` is `[batch, 1]` logits for (query, document) pairs. */
export interface RerankManifest extends ManifestBase {
  task: "rerank";
  /** Encoder width (informational). */
  hiddenSize?: number;
  /** `sigmoid` maps the logit to (0, 1); `none` returns it as is. */
  scoreActivation: ScoreActivation;
}

/** A sequence classifier: `onnx.output` is `[batch, labels.length]` logits. */
export interface ClassifyManifest extends ManifestBase {
  task: "classify";
  /** Encoder width (informational). */
  hiddenSize?: number;
  /** Label names in logit order. */
  labels: string[];
  /** `single_label`: softmax over the logits; `multi_label`: a sigmoid per logit. */
  problemType: ProblemType;
}

export type ShoalModelManifest = EmbedManifest | RerankManifest | ClassifyManifest;

export function estimateMemoryBytes(weightBytes: number): number {
  return Math.ceil(weightBytes * 1.5);
}

function fail(msg: string): never {
  throw new Error(`invalid ${MANIFEST_FILE}: ${msg}`);
}

function str(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (typeof v !== "string" || v === "") fail(`"${key}" must be a non-empty string`);
  return v;
}

function posInt(o: Record<string, unknown>, key: string): number {
  const v = o[key];
  if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) fail(`"${key}" must be a positive integer`);
  return v;
}

function obj(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) fail(`${what} must be an object`);
  return v as Record<string, unknown>;
}

function oneOf<T extends string>(o: Record<string, unknown>, key: string, allowed: readonly T[]): T {
  const v = o[key];
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) fail(`"${key}" must be ${allowed.join(" | ")}`);
  return v as T;
}

function labels(v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "string" && x !== "")) {
    fail(`"labels" must be a non-empty array of non-empty strings`);
  }
  if (new Set(v).size !== v.length) fail(`"labels" must be unique`);
  return v as string[];
}

function prompts(v: unknown): { query?: string; passage?: string } {
  const p = obj(v, '"prompts"');
  const out: { query?: string; passage?: string } = {};
  for (const [key, value] of Object.entries(p)) {
    if (key !== "query" && key !== "passage") fail(`"prompts.${key}" is not a role (query | passage)`);
    if (typeof value !== "string" || value === "") fail(`"prompts.${key}" must be a non-empty string`);
    out[key] = value;
  }
  return out;
}

/**
 * Validates parsed JSON as a manifest (throws with the first offending field). The runtime's
 * reader (services/common model-manifest.ts) checks the same rules and reports every problem.
 */
export function parseManifest(json: unknown): ShoalModelManifest {
  const m = obj(json, "manifest");
  if (m.formatVersion !== MANIFEST_FORMAT_VERSION) fail(`unsupported formatVersion ${String(m.formatVersion)}`);
  const task = m.task;
  if (task !== "embed" && task !== "rerank" && task !== "classify") fail(`unsupported task ${String(task)}`);
  const onnx = obj(m.onnx, '"onnx"');
  const inputs = obj(onnx.inputs, '"onnx.inputs"');
  const tokenTypeIds = inputs.tokenTypeIds;
  if (tokenTypeIds !== undefined && typeof tokenTypeIds !== "string") fail(`"onnx.inputs.tokenTypeIds" must be a string`);
  const base = {
    formatVersion: MANIFEST_FORMAT_VERSION,
    id: str(m, "id"),
    maxSequenceLength: posInt(m, "maxSequenceLength"),
    onnx: {
      file: str(onnx, "file"),
      output: str(onnx, "output"),
      inputs: {
        inputIds: str(inputs, "inputIds"),
        attentionMask: str(inputs, "attentionMask"),
        ...(tokenTypeIds !== undefined ? { tokenTypeIds } : {}),
      },
    },
    tokenizer: str(m, "tokenizer"),
    memoryBytes: posInt(m, "memoryBytes"),
    source: m.source === undefined ? {} : obj(m.source, '"source"'),
    ...(m.origin === undefined ? {} : { origin: oneOf(m, "origin", ["generated", "pretrained"] as const) }),
  } as const;
  if (task === "embed") {
    const pooling = m.pooling;
    if (pooling !== "mean" && pooling !== "cls" && pooling !== "none") fail(`"pooling" must be mean | cls | none`);
    if (typeof m.normalize !== "boolean") fail(`"normalize" must be a boolean`);
    if (m.matryoshka !== undefined && typeof m.matryoshka !== "boolean") fail(`"matryoshka" must be a boolean`);
    return {
      ...base,
      task,
      dimensions: posInt(m, "dimensions"),
      pooling,
      normalize: m.normalize,
      ...(m.prompts === undefined ? {} : { prompts: prompts(m.prompts) }),
      ...(m.matryoshka === undefined ? {} : { matryoshka: m.matryoshka }),
    };
  }
  for (const key of ["dimensions", "pooling", "normalize", "prompts", "matryoshka"]) {
    if (m[key] !== undefined) fail(`"${key}" is only for task embed`);
  }
  const hiddenSize = m.hiddenSize === undefined ? {} : { hiddenSize: posInt(m, "hiddenSize") };
  if (task === "rerank") {
    return { ...base, task, ...hiddenSize, scoreActivation: oneOf(m, "scoreActivation", ["sigmoid", "none"]) };
  }
  const problemType = oneOf(m, "problemType", ["single_label", "multi_label"]);
  const names = labels(m.labels);
  if (problemType === "single_label" && names.length < 2) fail(`a single_label classifier needs at least 2 labels`);
  return { ...base, task, ...hiddenSize, labels: names, problemType };
}
