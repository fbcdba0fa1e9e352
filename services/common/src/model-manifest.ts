/**
 * Reads and validates a model directory (`shoal-model.json` + the files it names) into a frozen
 * {@link ModelSpec}. Every problem is reported at once so a broken generator or a hand-edited
 * manifest is fixed in one pass.
 */
import { readFile, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { ModelLoadError } from './model-load-error.ts';

export { ModelLoadError };

/** File name of the manifest inside a model directory. */
export const MANIFEST_FILE = 'shoal-model.json';

/** The only manifest format this runtime reads. */
export const SUPPORTED_FORMAT_VERSION = 1;

/** How token vectors become one vector per text. `none`: the model output is already [batch, hidden]. */
export type Pooling = 'mean' | 'cls' | 'none';

const POOLINGS: readonly Pooling[] = ['mean', 'cls', 'none'];

/** ONNX graph input names, as the manifest maps them. */
export interface ModelInputNames {
  readonly inputIds: string;
  readonly attentionMask: string;
  /** Absent for models without token types. */
  readonly tokenTypeIds: string | undefined;
}

/** A validated model directory. Frozen; file paths are absolute and were checked to exist. */
export interface ModelSpec {
  /** Absolute path of the model directory. */
  readonly dir: string;
  readonly id: string;
  readonly task: 'embed';
  /** Length of each output vector. */
  readonly dimensions: number;
  /** Most tokens per text, special tokens included. */
  readonly maxSequenceLength: number;
  readonly pooling: Pooling;
  /** Whether callers should L2-normalise vectors (the pool never does). */
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
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  const s = JSON.stringify(v);
  return `got ${s.length > 40 ? `${s.slice(0, 40)}…` : s}`;
}

/** Collects problems while reading fields; each problem names its field. */
class FieldReader {
  readonly problems: string[] = [];

  string(obj: Json, key: string, field: string): string {
    const v = obj[key];
    if (typeof v === 'string' && v.trim() !== '') return v;
    this.problems.push(`${field}: must be a non-empty string (${describe(v)})`);
    return '';
  }

  optionalString(obj: Json, key: string, field: string): string | undefined {
    return obj[key] === undefined ? undefined : this.string(obj, key, field);
  }

  integer(obj: Json, key: string, field: string, min: number): number {
    const v = obj[key];
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= min) return v;
    this.problems.push(`${field}: must be an integer >= ${min} (${describe(v)})`);
    return 0;
  }

  object(obj: Json, key: string, field: string): Json {
    const v = obj[key];
    if (isObject(v)) return v;
    this.problems.push(`${field}: must be an object (${describe(v)})`);
    return {};
  }

  /** A path relative to the model directory that stays inside it. */
  relativeFile(dir: string, obj: Json, key: string, field: string): string {
    const name = this.string(obj, key, field);
    if (name === '') return '';
    const abs = resolve(dir, name);
    const rel = relative(dir, abs);
    if (isAbsolute(name) || rel.startsWith('..') || isAbsolute(rel)) {
      this.problems.push(`${field}: must name a file inside the model directory (got ${JSON.stringify(name)})`);
      return '';
    }
    return abs;
  }
}

/** The problem with a file the manifest names, if any. */
async function fileProblem(path: string, field: string): Promise<string | undefined> {
  if (path === '') return undefined; // already reported by the field check
  try {
    return (await stat(path)).isFile() ? undefined : `${field}: ${path} is not a file`;
  } catch {
    return `${field}: ${path} does not exist`;
  }
}

/**
 * Validates a parsed manifest. Exported for tests and tools; {@link readModelDir} is the entry point.
 * @param dir absolute model directory, used to resolve file names
 * @returns the spec and every problem found (the spec is meaningless when problems is non-empty)
 */
export function validateManifest(dir: string, raw: unknown): { spec: ModelSpec; problems: string[] } {
  const r = new FieldReader();
  const m: Json = isObject(raw) ? raw : {};
  if (!isObject(raw)) r.problems.push(`manifest: must be a JSON object (${describe(raw)})`);

  if (m.formatVersion !== SUPPORTED_FORMAT_VERSION) {
    r.problems.push(`formatVersion: must be ${SUPPORTED_FORMAT_VERSION} (${describe(m.formatVersion)})`);
  }
  const id = r.string(m, 'id', 'id');
  if (m.task !== 'embed') r.problems.push(`task: must be "embed" (${describe(m.task)})`);
  const dimensions = r.integer(m, 'dimensions', 'dimensions', 1);
  // [CLS] and [SEP] alone take two positions.
  const maxSequenceLength = r.integer(m, 'maxSequenceLength', 'maxSequenceLength', 3);
  const pooling = m.pooling as Pooling;
  if (!POOLINGS.includes(pooling)) {
    r.problems.push(`pooling: must be one of ${POOLINGS.map((p) => `"${p}"`).join(', ')} (${describe(m.pooling)})`);
  }
  if (typeof m.normalize !== 'boolean') r.problems.push(`normalize: must be a boolean (${describe(m.normalize)})`);

  const onnx = r.object(m, 'onnx', 'onnx');
  const modelPath = isObject(m.onnx) ? r.relativeFile(dir, onnx, 'file', 'onnx.file') : '';
  const outputName = isObject(m.onnx) ? r.string(onnx, 'output', 'onnx.output') : '';
  const inputs = isObject(m.onnx) ? r.object(onnx, 'inputs', 'onnx.inputs') : {};
  const hasInputs = isObject(onnx.inputs);
  const inputNames: ModelInputNames = {
    inputIds: hasInputs ? r.string(inputs, 'inputIds', 'onnx.inputs.inputIds') : '',
    attentionMask: hasInputs ? r.string(inputs, 'attentionMask', 'onnx.inputs.attentionMask') : '',
    tokenTypeIds: hasInputs ? r.optionalString(inputs, 'tokenTypeIds', 'onnx.inputs.tokenTypeIds') : undefined,
  };

  const tokenizerPath = r.relativeFile(dir, m, 'tokenizer', 'tokenizer');
  const memoryBytes = m.memoryBytes === undefined ? undefined : r.integer(m, 'memoryBytes', 'memoryBytes', 1);
  let source: Json | undefined;
  if (m.source !== undefined) source = r.object(m, 'source', 'source');

  const spec: ModelSpec = {
    dir,
    id,
    task: 'embed',
    dimensions,
    maxSequenceLength,
    pooling,
    normalize: m.normalize === true,
    modelPath,
    outputName,
    inputNames,
    tokenizerPath,
    memoryBytes,
    source,
  };
  return { spec, problems: r.problems };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
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
    text = await readFile(manifestPath, 'utf8');
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
  const fileProblems = await Promise.all([fileProblem(spec.modelPath, 'onnx.file'), fileProblem(spec.tokenizerPath, 'tokenizer')]);
  for (const p of fileProblems) if (p !== undefined) problems.push(p);
  if (problems.length > 0) throw new ModelLoadError(absDir, problems);
  return deepFreeze(spec);
}
