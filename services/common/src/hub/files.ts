import { posix } from "node:path";

/** Which files of a repository to fetch. */
export interface HubFileSelection {
  /** Glob patterns (`*` within a path segment, `**` across; neither matches a leading dot) of files to fetch when the repository has them. */
  readonly include: readonly string[];
  /** Paths that must be in the repository: a missing one is a HubEntryNotFoundError (offline: a HubOfflineMissError). */
  readonly require?: readonly string[];
  /** Groups of alternatives: of each group, the first path the repository has is fetched (none when it has none). */
  readonly firstOf?: readonly (readonly string[])[];
}

/** The ONNX file Shoal runs when none is named. */
export const DEFAULT_ONNX_FILE = "onnx/model.onnx";

/** The files Shoal reads from a model repository besides the ONNX file (configs, tokenizer, sentence-transformers modules). */
export const SHOAL_MODEL_CONFIG_FILES: readonly string[] = Object.freeze([
  "config.json",
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "modules.json",
  "sentence_bert_config.json",
  "config_sentence_transformers.json",
  "1_Pooling/config.json",
  "2_Normalize/*",
  "shoal-model.json",
]);

/**
 * The selection Shoal serves a model from: its configuration and tokenizer files, and one ONNX
 * file with its external-data file when it has one: `onnx/model.onnx` (else an older export's root
 * `model.onnx`), or a named variant such as `onnx/model_qint8_avx512.onnx`. `config.json` is
 * required, and so is a variant named here; whether the rest is enough to serve the model is for
 * the manifest derivation to judge. `extra` adds patterns (e.g. `model.safetensors` for a sidecar).
 */
export function shoalModelFiles(options: { onnxFile?: string; extra?: readonly string[] } = {}): HubFileSelection {
  const named = options.onnxFile;
  const include = [...SHOAL_MODEL_CONFIG_FILES, ...(options.extra ?? [])];
  if (named !== undefined) return { include: [...include, named, `${named}_data`], require: ["config.json", named] };
  return {
    include,
    require: ["config.json"],
    firstOf: [
      [DEFAULT_ONNX_FILE, ROOT_ONNX_FILE],
      [`${DEFAULT_ONNX_FILE}_data`, `${ROOT_ONNX_FILE}_data`],
    ],
  };
}

const ROOT_ONNX_FILE = "model.onnx";

/** True when `file` is one `selection` would fetch if present (offline, where the repository's list is unknown). */
export function isSelected(file: string, selection: HubFileSelection): boolean {
  return matchesAny(file, selection.include) || (selection.require ?? []).includes(file) || (selection.firstOf ?? []).some((g) => g.includes(file));
}

/** True when `file` matches one of `patterns`. */
export function matchesAny(file: string, patterns: readonly string[]): boolean {
  return patterns.some((pattern) => pattern === file || posix.matchesGlob(file, pattern));
}

/** The repository files a selection picks, and the required ones missing from the repository. */
export function selectFiles(repoFiles: readonly string[], selection: HubFileSelection): { files: string[]; missing: string[] } {
  const present = new Set(repoFiles);
  const files = repoFiles.filter((f) => matchesAny(f, selection.include) || (selection.require ?? []).includes(f));
  for (const group of selection.firstOf ?? []) {
    const first = group.find((f) => present.has(f));
    if (first !== undefined) files.push(first);
  }
  const missing = (selection.require ?? []).filter((f) => !present.has(f));
  return { files: [...new Set(files)].sort(), missing };
}
