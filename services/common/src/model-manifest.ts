/**
 * Reads and validates a model directory (`shoal-model.json` + the files it names) into a frozen
 * {@link ModelSpec}: an embedder, a cross-encoder reranker or a sequence classifier (`task`).
 * Every problem is reported at once so a broken generator or a hand-edited manifest is fixed in
 * one pass. The format is described in infra/models/README.md.
 */
import { readFile, stat } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import { isJsonObject, type JsonObject } from "./json.ts";
import { ModelLoadError } from "./model-load-error.ts";

export { ModelLoadError };

/** File name of the manifest inside a model directory. */
export const MANIFEST_FILE = "shoal-model.json";

/** The only manifest format this runtime reads. */
export const SUPPORTED_FORMAT_VERSION = 1;

/** What a model computes. The worker picks its runner by this. */
export type ModelTask = "embed" | "rerank" | "classify";

/** Every task, in the order problems list them. */
export const MODEL_TASKS: readonly ModelTask[] = ["embed", "rerank", "classify"];

/** How token vectors become one vector per text. `none`: the model output is already [batch, dimensions]. */
export type Pooling = "mean" | "cls" | "none";

const POOLINGS: readonly Pooling[] = ["mean", "cls", "none"];

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
  /** Absolute path of the ONNX file. */
  readonly modelPath: string;
  readonly outputName: string;
  readonly inputNames: ModelInputNames;
  /** Absolute path of tokenizer.json. */
  readonly tokenizerPath: string;
  /** Resident memory estimate from the manifest, if given. */
  readonly memoryBytes: number | undefined;
  /** Provenance as written by the generator or exporter; opaque to the runtime. */
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

function describe(v: unknown): string {
  if (v === undefined) return "missing";
  const s = JSON.stringify(v);
  return `got ${s.length > 40 ? `${s.slice(0, 40)}…` : s}`;
}

/** Collects problems while reading fields; each problem names its field. */
class FieldReader {
  readonly problems: string[] = [];

  string(obj: Json, key: string, field: string): string {
    const v = obj[key];
    if (typeof v === "string" && v.trim() !== "") return v;
    this.problems.push(`${field}: must be a non-empty string (${describe(v)})`);
    return "";
  }

  optionalString(obj: Json, key: string, field: string): string | undefined {
    return obj[key] === undefined ? undefined : this.string(obj, key, field);
  }

  integer(obj: Json, key: string, field: string, min: number): number {
    const v = obj[key];
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= min) return v;
    this.problems.push(`${field}: must be an integer >= ${min} (${describe(v)})`);
    return 0;
  }

  /** One of `allowed`, or undefined (and a problem) when the value is not. */
  oneOf<T extends string>(obj: Json, key: string, field: string, allowed: readonly T[]): T | undefined {
    const v = obj[key];
    if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as T;
    this.problems.push(`${field}: must be one of ${allowed.map((a) => `"${a}"`).join(", ")} (${describe(v)})`);
    return undefined;
  }

  /** A non-empty array of unique, non-empty strings. */
  labels(obj: Json, key: string, field: string): string[] {
    const v = obj[key];
    if (!Array.isArray(v) || v.length === 0) {
      this.problems.push(`${field}: must be a non-empty array of label names (${describe(v)})`);
      return [];
    }
    const bad = v.findIndex((x) => typeof x !== "string" || x.trim() === "");
    if (bad >= 0) {
      this.problems.push(`${field}[${bad}]: must be a non-empty string (${describe(v[bad])})`);
      return [];
    }
    const names = v as string[];
    const dup = names.findIndex((x, i) => names.indexOf(x) !== i);
    if (dup >= 0) {
      this.problems.push(`${field}[${dup}]: duplicate label ${JSON.stringify(names[dup])}`);
      return [];
    }
    return names;
  }

  /** Reports a field that the manifest's task must not set. */
  forbidden(obj: Json, key: string, field: string, why: string): void {
    if (obj[key] !== undefined) this.problems.push(`${field}: ${why} (${describe(obj[key])})`);
  }

  object(obj: Json, key: string, field: string): Json {
    const v = obj[key];
    if (isJsonObject(v)) return v;
    this.problems.push(`${field}: must be an object (${describe(v)})`);
    return {};
  }

  /** A path relative to the model directory that stays inside it. */
  relativeFile(dir: string, obj: Json, key: string, field: string): string {
    const name = this.string(obj, key, field);
    if (name === "") return "";
    const abs = resolve(dir, name);
    const rel = relative(dir, abs);
    if (isAbsolute(name) || rel.startsWith("..") || isAbsolute(rel)) {
      this.problems.push(`${field}: must name a file inside the model directory (got ${JSON.stringify(name)})`);
      return "";
    }
    return abs;
  }
}

/** The problem with a file the manifest names, if any. */
async function fileProblem(path: string, field: string): Promise<string | undefined> {
  if (path === "") return undefined; // already reported by the field check
  try {
    return (await stat(path)).isFile() ? undefined : `${field}: ${path} is not a file`;
  } catch {
    return `${field}: ${path} does not exist`;
  }
}

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

/**
 * Reads `<dir>/shoal-model.json`, validates it, resolves file paths and checks the files exist.
 * @throws ModelLoadError listing every problem, each naming its field, with the directory path
 */
export async function readModelDir(dir: string): Promise<ModelSpec> {
  const absDir = resolve(dir);
  const manifestPath = join(absDir, MANIFEST_FILE);
  let text: string;
  try {
    text = await readFile(manifestPath, "utf8");
  } catch (err) {
    throw new ModelLoadError(absDir, [`${MANIFEST_FILE}: cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`], { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ModelLoadError(absDir, [`${MANIFEST_FILE}: is not valid JSON (${(err as Error).message})`], { cause: err });
  }
  const { spec, problems } = validateManifest(absDir, raw);
  const fileProblems = await Promise.all([fileProblem(spec.modelPath, "onnx.file"), fileProblem(spec.tokenizerPath, "tokenizer")]);
  for (const p of fileProblems) if (p !== undefined) problems.push(p);
  if (problems.length > 0) throw new ModelLoadError(absDir, problems);
  return deepFreeze(spec);
}
