/**
 * The huggingface_hub cache layout, shared with Python tools:
 * `<cacheDir>/models--org--name/{blobs/<etag>, snapshots/<sha>/<path> → ../../blobs/<etag>, refs/<revision>}`.
 * Snapshot entries are relative symlinks (they survive moving the cache); a ref file holds the
 * commit sha a branch or tag pointed at when last seen.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, symlink, unlink, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";

/** A full 40-hex commit sha. */
export const COMMIT_SHA = /^[0-9a-f]{40}$/;

/** Paths of one repository in the cache. */
export interface RepoCachePaths {
  /** `<cacheDir>/models--org--name`. */
  readonly storage: string;
  blob(etag: string): string;
  snapshot(sha: string): string;
  pointer(sha: string, file: string): string;
  ref(revision: string): string;
}

/** The cache folder name of a model repository: `models--org--name`. */
export function repoFolderName(repo: string): string {
  return ["models", ...repo.split("/")].join("--");
}

/** The cache paths of `repo` under `cacheDir`. */
export function repoCachePaths(cacheDir: string, repo: string): RepoCachePaths {
  const storage = join(cacheDir, repoFolderName(repo));
  return {
    storage,
    blob: (etag) => join(storage, "blobs", etag),
    snapshot: (sha) => join(storage, "snapshots", sha),
    pointer: (sha, file) => join(storage, "snapshots", sha, ...file.split("/")),
    ref: (revision) => join(storage, "refs", ...revision.split("/")),
  };
}

/**
 * Why a repository file path may not be joined onto the cache, or undefined when it may. Paths come
 * from the server: refuse absolute paths and '..' segments so none escapes the snapshot folder.
 */
export function relativeFileProblem(file: string): string | undefined {
  if (file === "" || file.startsWith("/") || file.includes("\\") || file.includes("\0")) return "not a relative POSIX path";
  if (file.split("/").some((part) => part === "" || part === "." || part === "..")) return "has an empty, '.' or '..' segment";
  return undefined;
}

/** True when `path` exists (following symlinks: a dangling snapshot link is not a file). */
export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The commit sha `refs/<revision>` holds, or undefined when the cache has no such ref. */
export async function readRef(paths: RepoCachePaths, revision: string): Promise<string | undefined> {
  try {
    const sha = (await readFile(paths.ref(revision), "utf8")).trim();
    return COMMIT_SHA.test(sha) ? sha : undefined;
  } catch {
    return undefined;
  }
}

/** Records `revision → sha` (not for a sha itself); atomic, so readers never see half a ref. */
export async function writeRef(paths: RepoCachePaths, revision: string, sha: string): Promise<void> {
  if (revision === sha || (await readRef(paths, revision)) === sha) return;
  const target = paths.ref(revision);
  await mkdir(dirname(target), { recursive: true });
  const tmp = `${target}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(tmp, sha);
  await rename(tmp, target);
}

/**
 * The commit sha a revision names in the cache alone: a full sha is itself (when its snapshot
 * exists), a branch or tag goes through `refs/`. Undefined when the cache cannot tell.
 */
export async function cachedCommitSha(paths: RepoCachePaths, revision: string): Promise<string | undefined> {
  if (COMMIT_SHA.test(revision)) return (await exists(paths.snapshot(revision))) ? revision : undefined;
  return readRef(paths, revision);
}

/** Points `snapshots/<sha>/<file>` at `blobs/<etag>` with a relative symlink, replacing what was there. */
export async function linkSnapshotFile(paths: RepoCachePaths, sha: string, file: string, etag: string): Promise<string> {
  const pointer = paths.pointer(sha, file);
  await mkdir(dirname(pointer), { recursive: true });
  await unlink(pointer).catch(() => undefined);
  const target = relative(dirname(pointer), paths.blob(etag));
  try {
    await symlink(target, pointer);
  } catch (err) {
    // Another process linked the same file between unlink and symlink: fine when it is the same blob.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  return pointer;
}

/** Removes a file if present (a partial or refused download). */
export async function removeQuietly(path: string): Promise<void> {
  await rm(path, { force: true });
}
