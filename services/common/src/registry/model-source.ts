import { createHash } from "node:crypto";
import { readdir, stat } from "node:fs/promises";
import { isAbsolute, join, relative } from "node:path";

/** Where a model source resolved to on this host: a folder readModelDir reads, and the revision it holds. */
export interface ResolvedSource {
  readonly dir: string;
  /** A folder's fingerprint, a Hub commit sha: what the registry records and jobs name. */
  readonly revision: string;
}

export interface ResolveOptions {
  /** Resolve to exactly this revision (a registry record being applied); absent: the newest (AddModel). */
  readonly revision?: string;
  readonly signal?: AbortSignal;
  /** The ONNX export to fetch when the repository has several (see onnxVariantFile). */
  readonly onnxVariant?: string;
  /** A sidecar model: its safetensors weights are fetched too. */
  readonly runtime?: "onnx" | "sidecar";
}

/**
 * Turns a model source — an absolute folder path, or `hf:<org>/<name>[@<revision>]` once a Hub
 * client is plugged in — into a local folder and its revision. Throws {@link SourceRefusedError}.
 */
export type ModelSourceResolver = (source: string, opts: ResolveOptions) => Promise<ResolvedSource>;

/** Why a source is refused, as the gateway answers it: InvalidArgument, NotFound, FailedPrecondition, PermissionDenied, Unavailable. */
export type SourceRefusal = "invalid" | "not-found" | "precondition" | "denied" | "unavailable";

/** Why a source cannot be served (see {@link SourceRefusal}). */
export class SourceRefusedError extends Error {
  override readonly name = "SourceRefusedError";
  constructor(
    readonly kind: SourceRefusal,
    message: string,
  ) {
    super(message);
  }
}

/** Files a fingerprint looks at, at most (a model folder holds a handful). */
const MAX_FINGERPRINT_FILES = 10_000;

/**
 * A folder's revision: SHA-256 (40 hex digits) over the relative path, size and modification time
 * of every file under it. It changes when a file is replaced or rewritten, without reading the
 * weights (hundreds of MB); it is a fingerprint of the listing, not of the bytes.
 */
export async function folderRevision(dir: string): Promise<string> {
  const hash = createHash("sha256");
  const files: string[] = [];
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      if (files.length >= MAX_FINGERPRINT_FILES) return;
      const path = join(at, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile() || entry.isSymbolicLink()) files.push(path);
    }
  };
  await walk(dir);
  files.sort();
  for (const path of files) {
    const s = await stat(path).catch(() => undefined);
    if (s === undefined) continue;
    hash.update(`${relative(dir, path)}\0${s.size}\0${Math.trunc(s.mtimeMs)}\n`);
  }
  return hash.digest("hex").slice(0, 40);
}

/** A folder source: an absolute path that every gateway and worker sees (a shared volume, the same image). */
export const resolveFolderSource: ModelSourceResolver = async (source) => {
  if (!isAbsolute(source)) throw new SourceRefusedError("invalid", `source: '${source.slice(0, 200)}' must be an absolute folder path (or hf:<org>/<name>)`);
  const s = await stat(source).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") throw new SourceRefusedError("not-found", `source: no folder at ${source}`);
    throw new SourceRefusedError("precondition", `source: ${source} cannot be read (${err.code ?? err.message})`);
  });
  if (!s.isDirectory()) throw new SourceRefusedError("invalid", `source: ${source} is a file, not a model folder`);
  return { dir: source, revision: await folderRevision(source) };
};

/**
 * The resolver a service uses: `hf:` sources go to `hub` (the Hub client, when one is plugged in),
 * anything else is a folder.
 */
export function createSourceResolver(opts: { readonly hub?: ModelSourceResolver } = {}): ModelSourceResolver {
  return (source, resolveOpts) => {
    if (source.startsWith("hf:")) {
      if (opts.hub === undefined)
        return Promise.reject(new SourceRefusedError("precondition", "source: hf: sources need the Hub client, which this build does not configure"));
      return opts.hub(source, resolveOpts);
    }
    return resolveFolderSource(source, resolveOpts);
  };
}
