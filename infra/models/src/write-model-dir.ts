/** Writes a complete Shoal model directory for a preset. */
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { buildBertGraph, INPUT_NAMES, LOGITS_OUTPUT_NAME, OUTPUT_NAME } from "./bert-graph.ts";
import type { ShoalModelManifest } from "./manifest.ts";
import { estimateMemoryBytes, MANIFEST_FILE, MANIFEST_FORMAT_VERSION } from "./manifest.ts";
import type { BertPreset } from "./presets.ts";
import { GENERATOR_NAME, GENERATOR_VERSION } from "./presets.ts";
import { buildTokenizerConfig, buildTokenizerJson } from "./tokenizer-json.ts";
import { buildVocab } from "./vocab.ts";

export const MODEL_FILE = "model.onnx";
export const TOKENIZER_FILE = "tokenizer.json";
export const TOKENIZER_CONFIG_FILE = "tokenizer_config.json";

export interface WrittenFile {
  name: string;
  bytes: number;
  sha256: string;
}

export interface WriteResult {
  dir: string;
  manifest: ShoalModelManifest;
  files: WrittenFile[];
  parameterCount: number;
  seconds: number;
}

export interface WriteOptions {
  /** Progress lines (steps, sizes, timings). */
  log?: (line: string) => void;
}

export function buildManifest(preset: BertPreset, weightBytes: number): ShoalModelManifest {
  const onnx = { file: MODEL_FILE, output: OUTPUT_NAME, inputs: { ...INPUT_NAMES } };
  const memoryBytes = estimateMemoryBytes(weightBytes);
  const source = { generator: GENERATOR_NAME, generatorVersion: GENERATOR_VERSION, preset: preset.name, seed: preset.seed };
  const head = preset.head;
  if (head === undefined) {
    // Key order is part of the bytes (and so of the cache key): keep it.
    return {
      formatVersion: MANIFEST_FORMAT_VERSION,
      id: preset.id,
      task: "embed",
      dimensions: preset.hidden,
      maxSequenceLength: preset.maxSequenceLength,
      pooling: preset.pooling,
      normalize: preset.normalize,
      onnx,
      tokenizer: TOKENIZER_FILE,
      memoryBytes,
      source,
    };
  }
  const shape = { hiddenSize: preset.hidden, maxSequenceLength: preset.maxSequenceLength };
  const rest = { onnx: { ...onnx, output: LOGITS_OUTPUT_NAME }, tokenizer: TOKENIZER_FILE, memoryBytes, source };
  const start = { formatVersion: MANIFEST_FORMAT_VERSION, id: preset.id } as const;
  if (head.task === "rerank") return { ...start, task: "rerank", ...shape, scoreActivation: head.scoreActivation, ...rest };
  return { ...start, task: "classify", ...shape, labels: [...head.labels], problemType: head.problemType, ...rest };
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

export async function writeModelDir(preset: BertPreset, dir: string, options: WriteOptions = {}): Promise<WriteResult> {
  const log = options.log ?? (() => {});
  const t0 = performance.now();
  const elapsed = (): string => `${((performance.now() - t0) / 1000).toFixed(2)} s`;
  await mkdir(dir, { recursive: true });
  const files: WrittenFile[] = [];
  const write = async (name: string, data: Uint8Array | string): Promise<void> => {
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    await writeFile(join(dir, name), bytes);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    files.push({ name, bytes: bytes.byteLength, sha256 });
    log(`  wrote ${name}: ${formatBytes(bytes.byteLength)} (sha256 ${sha256.slice(0, 12)}) [${elapsed()}]`);
  };

  log(`[1/3] vocabulary + tokenizer (${preset.vocabSize} tokens)`);
  const vocab = buildVocab(preset.vocabSize);
  await write(TOKENIZER_FILE, `${JSON.stringify(buildTokenizerJson(vocab), null, 2)}\n`);
  await write(TOKENIZER_CONFIG_FILE, `${JSON.stringify(buildTokenizerConfig(preset.maxSequenceLength), null, 2)}\n`);

  const head = preset.head === undefined ? "" : `, ${preset.head.task} head`;
  log(`[2/3] ONNX graph: ${preset.layers} layers, hidden ${preset.hidden}, ${preset.heads} heads, FFN ${preset.intermediate}${head}`);
  const graph = buildBertGraph(preset);
  log(`  ${graph.nodeCount} nodes, ${(graph.parameterCount / 1e6).toFixed(2)}M parameters [${elapsed()}]`);
  await write(MODEL_FILE, graph.bytes);

  log("[3/3] manifest");
  const manifest = buildManifest(preset, graph.weightBytes);
  await write(MANIFEST_FILE, `${JSON.stringify(manifest, null, 2)}\n`);

  const seconds = (performance.now() - t0) / 1000;
  const total = files.reduce((a, f) => a + f.bytes, 0);
  log(`done: ${dir} (${formatBytes(total)} in ${files.length} files, ${seconds.toFixed(2)} s)`);
  return { dir, manifest, files, parameterCount: graph.parameterCount, seconds };
}
