/** The `shoal-model.json` manifest of a Shoal model directory: its type, builder and parser. */

export const MANIFEST_FILE = 'shoal-model.json';
export const MANIFEST_FORMAT_VERSION = 1;

export type Pooling = 'mean' | 'cls' | 'none';

/** Where a generated model came from (present on models written by this package). */
export interface GeneratedModelSource {
  generator: string;
  generatorVersion: number;
  preset: string;
  seed: number;
}

export interface ShoalModelManifest {
  formatVersion: 1;
  /** Model id that requests name. */
  id: string;
  task: 'embed';
  /** Length of each output vector. */
  dimensions: number;
  /** Longest token sequence (including [CLS]/[SEP]) callers may send. */
  maxSequenceLength: number;
  /** How token vectors become one vector: masked mean, the first ([CLS]) token, or already pooled. */
  pooling: Pooling;
  /** L2-normalise the pooled vector. */
  normalize: boolean;
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
}

export function estimateMemoryBytes(weightBytes: number): number {
  return Math.ceil(weightBytes * 1.5);
}

function fail(msg: string): never {
  throw new Error(`invalid ${MANIFEST_FILE}: ${msg}`);
}

function str(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v === '') fail(`"${key}" must be a non-empty string`);
  return v;
}

function posInt(o: Record<string, unknown>, key: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) fail(`"${key}" must be a positive integer`);
  return v;
}

function obj(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(`${what} must be an object`);
  return v as Record<string, unknown>;
}

/** Validates parsed JSON as a manifest (throws with the offending field). */
export function parseManifest(json: unknown): ShoalModelManifest {
  const m = obj(json, 'manifest');
  if (m.formatVersion !== MANIFEST_FORMAT_VERSION) fail(`unsupported formatVersion ${String(m.formatVersion)}`);
  if (m.task !== 'embed') fail(`unsupported task ${String(m.task)}`);
  const pooling = m.pooling;
  if (pooling !== 'mean' && pooling !== 'cls' && pooling !== 'none') fail(`"pooling" must be mean | cls | none`);
  if (typeof m.normalize !== 'boolean') fail(`"normalize" must be a boolean`);
  const onnx = obj(m.onnx, '"onnx"');
  const inputs = obj(onnx.inputs, '"onnx.inputs"');
  const tokenTypeIds = inputs.tokenTypeIds;
  if (tokenTypeIds !== undefined && typeof tokenTypeIds !== 'string') fail(`"onnx.inputs.tokenTypeIds" must be a string`);
  return {
    formatVersion: MANIFEST_FORMAT_VERSION,
    id: str(m, 'id'),
    task: 'embed',
    dimensions: posInt(m, 'dimensions'),
    maxSequenceLength: posInt(m, 'maxSequenceLength'),
    pooling,
    normalize: m.normalize,
    onnx: {
      file: str(onnx, 'file'),
      output: str(onnx, 'output'),
      inputs: {
        inputIds: str(inputs, 'inputIds'),
        attentionMask: str(inputs, 'attentionMask'),
        ...(tokenTypeIds !== undefined ? { tokenTypeIds } : {}),
      },
    },
    tokenizer: str(m, 'tokenizer'),
    memoryBytes: posInt(m, 'memoryBytes'),
    source: m.source === undefined ? {} : obj(m.source, '"source"'),
  };
}
