/**
 * Reads and validates a model directory (`shoal-model.json` + the files it names) into a frozen
 * {@link ModelSpec}: an embedder, a cross-encoder reranker or a sequence classifier (`task`).
 * Every problem is reported at once so a broken generator or a hand-edited manifest is fixed in
 * one pass. The format is described in infra/models/README.md.
 */
import { readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { deriveHubManifest, HUB_CONFIG_FILE, type HubReadOptions, overlayManifest } from "./hub-layout.ts";
import { isJsonObject, type JsonObject } from "./json.ts";
import { ModelLoadError } from "./model-load-error.ts";
import { describe, FieldReader, fileProblem } from "./manifest-field-reader.ts";

export { ModelLoadError };
export type { HubModelSource, HubReadOptions } from "./hub-layout.ts";
export { hubSourceOf } from "./hub-layout.ts";

/** File name of the manifest inside a model directory. */
export const MANIFEST_FILE = "shoal-model.json";

/** The only manifest format this runtime reads. */
export const SUPPORTED_FORMAT_VERSION = 1;

/** What a model computes. The worker picks its runner by this. */
export type ModelTask = "embed" | "rerank" | "classify";

/** Every task, in the order problems list them. */
export const MODEL_TASKS: readonly ModelTask[] = ["embed", "rerank", "classify"];

/**
 * How token vectors become one vector per text. `none`: the model output is already [batch,
 * dimensions]; `lasttoken`: the last real token's vector (decoder embedders, whose last token
 * has seen the whole text).
 */
export type Pooling = "mean" | "cls" | "lasttoken" | "none";

const POOLINGS: readonly Pooling[] = ["mean", "cls", "none", "lasttoken"];

/** What turns a reranker's logit into its score: `sigmoid` gives (0, 1), `none` passes the raw logit. */
export type ScoreActivation = "sigmoid" | "none";

const SCORE_ACTIVATIONS: readonly ScoreActivation[] = ["sigmoid", "none"];

/**
 * How a classifier's logits become label scores: `single_label` applies softmax (scores sum to 1,
 * one label wins), `multi_label` applies a sigmoid to each logit on its own.
 */
export type ProblemType = "single_label" | "multi_label";

const PROBLEM_TYPES: readonly ProblemType[] = ["single_label", "multi_label"];

/**
 * Where a model's weights come from: `generated` (shoal-modelgen's fixed pseudo-random weights,
 * right shapes but meaningless answers) or `pretrained` (trained weights from an upstream model).
 */
export type ModelOrigin = "generated" | "pretrained";

const ORIGINS: readonly ModelOrigin[] = ["generated", "pretrained"];

/**
 * Text an embedder expects in front of each input, by the role of the text (E5's `query: ` and
 * `passage: `, BGE's retrieval instruction before queries). Declared per model in its manifest;
 * an absent role means the text is sent as is.
 */
export interface EmbedPrompts {
  /** Prefix for search queries. */
  readonly query: string | undefined;
  /** Prefix for the texts searched (documents, passages). */
  readonly passage: string | undefined;
}

const PROMPT_ROLES: readonly (keyof EmbedPrompts)[] = ["query", "passage"];

/** ONNX graph input names, as the manifest maps them. */
export interface ModelInputNames {
  readonly inputIds: string;
  readonly attentionMask: string;
  /** Absent for models without token types. */
  readonly tokenTypeIds: string | undefined;
}

/** Fields every task has. Frozen; file paths are absolute and were checked to exist. */
interface ModelSpecBase {
  /** Absolute path of the model directory. */
  readonly dir: string;
  readonly id: string;
  readonly task: ModelTask;
  /**
   * Values per input that the runtime reads from `outputName` after pooling: the vector length
   * for `embed`, 1 for `rerank` (the logit), the number of labels for `classify`. Rerank and
   * classify outputs are `[batch, dimensions]` (their pooling is `none`).
   */
  readonly dimensions: number;
  /** Most tokens per input (a text, or a query + document pair), special tokens included. */
  readonly maxSequenceLength: number;
  /** Always `none` for rerank and classify: their graphs pool internally (the [CLS] pooler). */
  readonly pooling: Pooling;
  /** Whether callers should L2-normalise vectors (the pool never does). Always false for rerank and classify. */
  readonly normalize: boolean;
  /**
   * Absolute path of the ONNX file; for a Hub-layout model read for a runtime sidecar
   * (`runtime: "sidecar"`), its weights file (model.safetensors), which the worker never opens.
   */
  readonly modelPath: string;
  readonly outputName: string;
  readonly inputNames: ModelInputNames;
  /** Absolute path of tokenizer.json. */
  readonly tokenizerPath: string;
  /** Resident memory estimate from the manifest, if given. */
  readonly memoryBytes: number | undefined;
  /**
   * Provenance as written by the generator or exporter; opaque to the runtime. For a model derived
   * from a Hugging Face layout, a {@link HubModelSource} (read it with `hubSourceOf`).
   */
  readonly source: Readonly<Record<string, unknown>> | undefined;
  /**
   * `generated` or `pretrained`: the manifest's `origin`, else `generated` when `source.generator`
   * is set (every directory shoal-modelgen writes) and `pretrained` otherwise.
   */
  readonly origin: ModelOrigin;
}

/** A sentence embedder: output `[batch, seq, dimensions]` (or `[batch, dimensions]` when pooling is `none`). */
export interface EmbedModelSpec extends ModelSpecBase {
  readonly task: "embed";
  /** Prefixes by text role (manifest `prompts`); both undefined when the model wants none. */
  readonly prompts: EmbedPrompts;
  /**
   * Whether the model was trained so that a prefix of its vector (re-normalised) is itself a
   * usable embedding (Matryoshka representation learning). Manifest `matryoshka`, default false.
   */
  readonly matryoshka: boolean;
}

/**
 * A cross-encoder: each input is a (query, document) pair, tokenized by the tokenizer's pair
 * template (BERT: `[CLS] query [SEP] document [SEP]`, token type 0 up to the first `[SEP]`, 1
 * after; models without a token-type input, such as XLM-R rerankers, rely on the separators).
 * Output `[batch, 1]` logits.
 */
export interface RerankModelSpec extends ModelSpecBase {
  readonly task: "rerank";
  readonly pooling: "none";
  readonly normalize: false;
  /** Always 1 (and equal to `dimensions`). */
  readonly numLabels: number;
  readonly scoreActivation: ScoreActivation;
  /** Width of the encoder's hidden states, if the manifest says (informational). */
  readonly hiddenSize: number | undefined;
}

/** A sequence classifier: output `[batch, numLabels]` logits, one per label in `labels` order. */
export interface ClassifyModelSpec extends ModelSpecBase {
  readonly task: "classify";
  readonly pooling: "none";
  readonly normalize: false;
  /** `labels.length` (and equal to `dimensions`). */
  readonly numLabels: number;
  /** Label names, index i naming logit i. Non-empty, unique. */
  readonly labels: readonly string[];
  readonly problemType: ProblemType;
  /** Width of the encoder's hidden states, if the manifest says (informational). */
  readonly hiddenSize: number | undefined;
}

/**
 * A validated model directory: discriminated by `task`. Fields shared by all tasks
 * (`dimensions`, `pooling`, `normalize`, paths, names) read the same everywhere, so code that
 * only runs the graph needs no narrowing.
 */
export type ModelSpec = EmbedModelSpec | RerankModelSpec | ClassifyModelSpec;

type Json = JsonObject;

/** Task-specific fields, already validated. */
type TaskFields =
  | { task: "embed"; dimensions: number; pooling: Pooling; normalize: boolean; prompts: EmbedPrompts; matryoshka: boolean }
  | { task: "rerank"; scoreActivation: ScoreActivation; hiddenSize: number | undefined }
  | { task: "classify"; labels: string[]; problemType: ProblemType; hiddenSize: number | undefined };

/**
 * Validates a parsed manifest. Exported for tests and tools; {@link readModelDir} is the entry point.
 *
 * Task-specific fields: `embed` needs `dimensions`, `pooling`, `normalize`; `rerank` needs
 * `scoreActivation`; `classify` needs `labels` and `problemType`; rerank and classify may give
 * `hiddenSize` and must not give the embed-only fields (their output width is the label count).
 * @param dir absolute model directory, used to resolve file names
 * @returns the spec and every problem found (the spec is meaningless when problems is non-empty)
 */
export function validateManifest(dir: string, raw: unknown): { spec: ModelSpec; problems: string[] } {
  const r = new FieldReader();
  const m: Json = isJsonObject(raw) ? raw : {};
  if (!isJsonObject(raw)) r.problems.push(`manifest: must be a JSON object (${describe(raw)})`);

  if (m.formatVersion !== SUPPORTED_FORMAT_VERSION) {
    r.problems.push(`formatVersion: must be ${SUPPORTED_FORMAT_VERSION} (${describe(m.formatVersion)})`);
  }
  const id = r.string(m, "id", "id");
  const task = r.oneOf(m, "task", "task", MODEL_TASKS);
  // Read before maxSequenceLength so problems keep the manifest's field order.
  const dimensions = task === "embed" || task === undefined ? r.integer(m, "dimensions", "dimensions", 1) : 0;
  // [CLS] and [SEP] alone take two positions.
  const maxSequenceLength = r.integer(m, "maxSequenceLength", "maxSequenceLength", 3);
  const fields = taskFields(r, m, task, dimensions);

  const onnx = r.object(m, "onnx", "onnx");
  const modelPath = isJsonObject(m.onnx) ? r.relativeFile(dir, onnx, "file", "onnx.file") : "";
  const outputName = isJsonObject(m.onnx) ? r.string(onnx, "output", "onnx.output") : "";
  const inputs = isJsonObject(m.onnx) ? r.object(onnx, "inputs", "onnx.inputs") : {};
  const hasInputs = isJsonObject(onnx.inputs);
  const inputNames: ModelInputNames = {
    inputIds: hasInputs ? r.string(inputs, "inputIds", "onnx.inputs.inputIds") : "",
    attentionMask: hasInputs ? r.string(inputs, "attentionMask", "onnx.inputs.attentionMask") : "",
    tokenTypeIds: hasInputs ? r.optionalString(inputs, "tokenTypeIds", "onnx.inputs.tokenTypeIds") : undefined,
  };

  const tokenizerPath = r.relativeFile(dir, m, "tokenizer", "tokenizer");
  const memoryBytes = m.memoryBytes === undefined ? undefined : r.integer(m, "memoryBytes", "memoryBytes", 1);
  let source: Json | undefined;
  if (m.source !== undefined) source = r.object(m, "source", "source");
  const origin =
    m.origin === undefined
      ? source !== undefined && source["generator"] !== undefined
        ? "generated"
        : "pretrained"
      : (r.oneOf(m, "origin", "origin", ORIGINS) ?? "pretrained");

  const common = { dir, id, maxSequenceLength, modelPath, outputName, inputNames, tokenizerPath, memoryBytes, source, origin };
  let spec: ModelSpec;
  switch (fields.task) {
    case "embed":
      spec = {
        ...common,
        task: "embed",
        dimensions: fields.dimensions,
        pooling: fields.pooling,
        normalize: fields.normalize,
        prompts: fields.prompts,
        matryoshka: fields.matryoshka,
      };
      break;
    case "rerank":
      spec = {
        ...common,
        task: "rerank",
        dimensions: 1,
        pooling: "none",
        normalize: false,
        numLabels: 1,
        scoreActivation: fields.scoreActivation,
        hiddenSize: fields.hiddenSize,
      };
      break;
    case "classify":
      spec = {
        ...common,
        task: "classify",
        dimensions: fields.labels.length,
        pooling: "none",
        normalize: false,
        numLabels: fields.labels.length,
        labels: fields.labels,
        problemType: fields.problemType,
        hiddenSize: fields.hiddenSize,
      };
      break;
  }
  return { spec, problems: r.problems };
}

/** Reads the fields of one task; an unknown task (already reported) is read as embed. */
function taskFields(r: FieldReader, m: Json, task: ModelTask | undefined, dimensions: number): TaskFields {
  if (task === "embed" || task === undefined) {
    const pooling = r.oneOf(m, "pooling", "pooling", POOLINGS) ?? "mean";
    if (typeof m.normalize !== "boolean") r.problems.push(`normalize: must be a boolean (${describe(m.normalize)})`);
    if (m.matryoshka !== undefined && typeof m.matryoshka !== "boolean") {
      r.problems.push(`matryoshka: must be a boolean (${describe(m.matryoshka)})`);
    }
    return {
      task: "embed",
      dimensions,
      pooling,
      normalize: m.normalize === true,
      prompts: readPrompts(r, m),
      matryoshka: m.matryoshka === true,
    };
  }
  const why = `only for task "embed"; a ${task} model outputs [batch, numLabels] logits`;
  for (const key of ["dimensions", "pooling", "normalize", "prompts", "matryoshka"]) r.forbidden(m, key, key, why);
  if (task === "rerank") {
    const scoreActivation = r.oneOf(m, "scoreActivation", "scoreActivation", SCORE_ACTIVATIONS) ?? "sigmoid";
    return { task, scoreActivation, hiddenSize: optionalHiddenSize(r, m) };
  }
  const labels = r.labels(m, "labels", "labels");
  const problemType = r.oneOf(m, "problemType", "problemType", PROBLEM_TYPES) ?? "single_label";
  if (problemType === "single_label" && labels.length === 1) {
    r.problems.push('labels: a "single_label" classifier needs at least 2 labels (softmax over one label is always 1)');
  }
  return { task, labels, problemType, hiddenSize: optionalHiddenSize(r, m) };
}

/** `prompts`: an object with optional non-empty `query` / `passage` strings and nothing else. */
function readPrompts(r: FieldReader, m: Json): EmbedPrompts {
  if (m.prompts === undefined) return { query: undefined, passage: undefined };
  const raw = r.object(m, "prompts", "prompts");
  for (const key of Object.keys(raw)) {
    if (!(PROMPT_ROLES as readonly string[]).includes(key)) {
      r.problems.push(`prompts.${key}: unknown role (expected ${PROMPT_ROLES.map((p) => `"${p}"`).join(", ")})`);
    }
  }
  // A prompt is used verbatim: its trailing space matters, so only the empty string is refused.
  const prompt = (key: keyof EmbedPrompts): string | undefined => {
    const v = raw[key];
    if (v === undefined) return undefined;
    if (typeof v === "string" && v !== "") return v;
    r.problems.push(`prompts.${key}: must be a non-empty string (${describe(v)})`);
    return undefined;
  };
  return { query: prompt("query"), passage: prompt("passage") };
}

function optionalHiddenSize(r: FieldReader, m: Json): number | undefined {
  return m.hiddenSize === undefined ? undefined : r.integer(m, "hiddenSize", "hiddenSize", 1);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** The files named by a spec, as problems. */
async function missingFiles(spec: ModelSpec, problems: string[]): Promise<void> {
  const fileProblems = await Promise.all([fileProblem(spec.modelPath, "onnx.file"), fileProblem(spec.tokenizerPath, "tokenizer")]);
  for (const p of fileProblems) if (p !== undefined) problems.push(p);
}

async function isFile(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isFile(),
    () => false,
  );
}

/**
 * Reads a model folder into a frozen spec: its `shoal-model.json` when that is complete, else what
 * a Hugging Face layout's own files say (hub-layout.ts), with a partial `shoal-model.json` laid
 * over it. Paths are resolved and the files they name checked to exist.
 * @throws ModelLoadError listing every problem, each naming its file and field, with the folder
 */
export async function readModelDir(dir: string, options: HubReadOptions = {}): Promise<ModelSpec> {
  return (await readModelManifest(dir, options)).spec;
}

/**
 * {@link readModelDir}, with the manifest the spec was validated from (file names relative to the
 * folder): what a registry record carries so that a worker can know a model before it fetches the
 * model's files ({@link specOfManifest}).
 */
export async function readModelManifest(dir: string, options: HubReadOptions = {}): Promise<{ spec: ModelSpec; manifest: JsonObject }> {
  const absDir = resolve(dir);
  const manifestPath = join(absDir, MANIFEST_FILE);
  const hub = await isFile(join(absDir, HUB_CONFIG_FILE));
  let text: string | undefined;
  try {
    text = await readFile(manifestPath, "utf8");
  } catch (err) {
    if (!hub) {
      throw new ModelLoadError(absDir, [`${MANIFEST_FILE}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`], { cause: err });
    }
  }
  let raw: unknown;
  if (text !== undefined) {
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new ModelLoadError(absDir, [`${MANIFEST_FILE}: is not valid JSON (${(err as Error).message})`], { cause: err });
    }
    const { spec, problems } = validateManifest(absDir, raw);
    await missingFiles(spec, problems);
    if (problems.length === 0) return { spec: deepFreeze(spec), manifest: raw as Json };
    if (!hub) throw new ModelLoadError(absDir, problems);
    if (!isJsonObject(raw)) throw new ModelLoadError(absDir, [`${MANIFEST_FILE}: must be a JSON object (an override of the derived fields)`]);
  }
  const derived = await deriveHubManifest(absDir, options);
  if (derived.problems.length > 0) throw new ModelLoadError(absDir, derived.problems);
  const merged = raw === undefined ? derived.manifest : overlayManifest(derived.manifest, raw as Json);
  const { spec, problems } = validateManifest(absDir, merged);
  await missingFiles(spec, problems);
  // A field problem here comes from the override (the derived manifest is valid by construction).
  if (problems.length > 0)
    throw new ModelLoadError(
      absDir,
      problems.map((p) => (raw === undefined ? p : `${MANIFEST_FILE} (override): ${p}`)),
    );
  return { spec: deepFreeze(spec), manifest: merged };
}

/**
 * The spec a manifest gives for a folder whose files may not be there yet (a worker that fetches a
 * model's files on its first need). The files are checked when the model is loaded.
 * @throws ModelLoadError when the manifest itself is invalid
 */
export function specOfManifest(dir: string, manifest: unknown): ModelSpec {
  const absDir = resolve(dir);
  const { spec, problems } = validateManifest(absDir, manifest);
  if (problems.length > 0) throw new ModelLoadError(absDir, problems);
  return deepFreeze(spec);
}
