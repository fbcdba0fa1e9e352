/**
 * Fetches a model repository's files from a Hugging Face Hub (or a mirror at HF_ENDPOINT) into
 * the huggingface_hub cache and returns the snapshot folder.
 *
 * Written on `fetch` rather than `@huggingface/hub` (2.17.5 checked): its downloadFileToCacheDir
 * does not resume (`.incomplete` is rewritten from byte 0), does not verify content against the
 * ETag, has no offline mode and no progress callback, does not read HF_ENDPOINT or HF_TOKEN, and
 * for a branch names the snapshot folder after each file's last commit instead of the revision's
 * commit, so its cache is not the one Python's huggingface_hub reads (issue #48).
 */
import { mkdir, readdir } from "node:fs/promises";
import { join, relative } from "node:path";
import { cachedCommitSha, exists, linkSnapshotFile, relativeFileProblem, repoCachePaths, type RepoCachePaths, writeRef } from "./cache.ts";
import { downloadBlob, type HubProgress } from "./download.ts";
import { HubDownloadError, HubEntryNotFoundError, HubOfflineMissError, HubUnavailableError, ModelSourceError } from "./errors.ts";
import { type HubFileSelection, isSelected, selectFiles, shoalModelFiles } from "./files.ts";
import { fetchFileMetadata, fetchRevisionInfo, type HubRequestContext } from "./http.ts";
import { DEFAULT_REVISION, formatHubSource, repoIdProblem, revisionProblemOf } from "./model-source.ts";
import { readHubSettings } from "./settings.ts";

/** Options of {@link fetchHubModel}; unset endpoint, token, cache and offline come from the environment. */
export interface FetchHubModelOptions {
  /** `org/name`. */
  readonly repo: string;
  /** Branch, tag or commit sha (default `main`). */
  readonly revision?: string;
  /** Which files (default {@link shoalModelFiles}`()`). */
  readonly files?: HubFileSelection;
  /** Default `HF_ENDPOINT`, else the public Hub. */
  readonly endpoint?: string;
  /** Default `HF_TOKEN`, else `HF_TOKEN_PATH` / `$HF_HOME/token`. Pass null to send none. */
  readonly token?: string | null;
  /** Default `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`. */
  readonly cacheDir?: string;
  /** Serve from the cache only (default `HF_HUB_OFFLINE`). */
  readonly offline?: boolean;
  /** Environment the defaults are read from (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** Called as bytes arrive (per file; resumed bytes included). See formatHubProgress. */
  readonly onProgress?: (progress: HubProgress) => void;
  readonly signal?: AbortSignal;
  /** Custom fetch (tests, proxies). */
  readonly fetch?: typeof fetch;
  /** A transfer that receives nothing for this long is cut and resumed (default 30 s). */
  readonly idleTimeoutMs?: number;
  /** Files fetched at once (default 4). */
  readonly concurrency?: number;
}

/** A fetched (or cached) snapshot of a model repository. */
export interface HubModel {
  /** `<cache>/models--org--name/snapshots/<commitSha>`: the model folder. */
  readonly dir: string;
  readonly repo: string;
  /** The revision asked for. */
  readonly revision: string;
  /** The commit it resolved to. */
  readonly commitSha: string;
  /** Files of the selection in the snapshot, relative POSIX paths, sorted. */
  readonly files: readonly string[];
  /** True when served from the cache without reaching the endpoint (offline, or the endpoint unreachable). */
  readonly fromCache: boolean;
  /** Bytes received over the network by this call. */
  readonly downloadedBytes: number;
}

// One download per blob at a time within this process; other processes are handled in download.ts.
const inFlight = new Map<string, Promise<number>>();

/**
 * Fetches `repo@revision`'s selected files into the huggingface_hub cache layout and returns the
 * snapshot folder. Files already in the snapshot are not fetched again; a blob already in the cache
 * is linked without download. Offline, the revision is resolved through `refs/` and served from
 * the snapshot; when the endpoint is unreachable, the cache serves too if it can.
 * @throws ModelSourceError, HubRepoNotFoundError, HubRevisionNotFoundError, HubEntryNotFoundError,
 *   HubGatedError, HubDownloadError, HubUnavailableError, HubOfflineMissError
 */
export async function fetchHubModel(options: FetchHubModelOptions): Promise<HubModel> {
  const revision = options.revision ?? DEFAULT_REVISION;
  const problem = repoIdProblem(options.repo) ?? revisionProblemOf(revision);
  if (problem !== undefined) throw new ModelSourceError(formatHubSource(options.repo, revision), problem);
  const settings = readHubSettings(options.env ?? process.env);
  const selection = options.files ?? shoalModelFiles();
  const paths = repoCachePaths(options.cacheDir ?? settings.cacheDir, options.repo);
  const ctx: HubRequestContext = {
    repo: options.repo,
    revision,
    endpoint: (options.endpoint ?? settings.endpoint).replace(/\/+$/, ""),
    token: options.token === null ? undefined : (options.token ?? settings.token),
    fetch: options.fetch ?? globalThis.fetch,
    signal: options.signal,
  };
  if (options.offline ?? settings.offline) return fromCache(paths, ctx, selection, "HF_HUB_OFFLINE is set");

  let info: Awaited<ReturnType<typeof fetchRevisionInfo>>;
  try {
    info = await fetchRevisionInfo(ctx);
  } catch (err) {
    // Like huggingface_hub: an unreachable endpoint falls back to what the cache holds.
    if (!(err instanceof HubUnavailableError)) throw err;
    try {
      return await fromCache(paths, ctx, selection, err.message);
    } catch {
      throw err;
    }
  }
  const { files, missing } = selectFiles(info.files, selection);
  const firstMissing = missing[0];
  if (firstMissing !== undefined) throw new HubEntryNotFoundError({ ...ctx, file: firstMissing });
  for (const file of files) {
    const bad = relativeFileProblem(file);
    if (bad !== undefined) throw new HubDownloadError({ ...ctx, file }, `the repository lists a file path that ${bad}`);
  }
  await writeRef(paths, revision, info.commitSha);
  await mkdir(paths.snapshot(info.commitSha), { recursive: true });

  let downloadedBytes = 0;
  const queue = [...files];
  const worker = async (): Promise<void> => {
    try {
      for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
        // Not `+= await`: that reads the total before awaiting, and workers would overwrite each other.
        const received = await fetchFile(paths, ctx, info.commitSha, file, options);
        downloadedBytes += received;
      }
    } catch (err) {
      queue.length = 0; // the other workers finish their current file and stop
      throw err;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, files.length)) }, worker));
  return { dir: paths.snapshot(info.commitSha), repo: ctx.repo, revision, commitSha: info.commitSha, files, fromCache: false, downloadedBytes };
}

/** Puts one file into the snapshot: nothing when it is there, a link when its blob is, else a download. */
async function fetchFile(paths: RepoCachePaths, ctx: HubRequestContext, commitSha: string, file: string, options: FetchHubModelOptions): Promise<number> {
  if (await exists(paths.pointer(commitSha, file))) return 0;
  const meta = await fetchFileMetadata(ctx, commitSha, file);
  if (/[/\\]|^\.\.?$/.test(meta.etag)) throw new HubDownloadError({ ...ctx, file }, `unusable ETag ${JSON.stringify(meta.etag)}`);
  const blobPath = paths.blob(meta.etag);
  let received = 0;
  if (!(await exists(blobPath))) {
    let pending = inFlight.get(blobPath);
    if (pending === undefined) {
      await mkdir(join(paths.storage, "blobs"), { recursive: true });
      pending = downloadBlob({
        ctx,
        file,
        url: meta.url,
        etag: meta.etag,
        size: meta.size,
        blobPath,
        onProgress: options.onProgress,
        idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
        maxStalledAttempts: 5,
      }).finally(() => inFlight.delete(blobPath));
      inFlight.set(blobPath, pending);
      received = await pending;
    } else {
      await pending;
    }
  }
  await linkSnapshotFile(paths, commitSha, file, meta.etag);
  return received;
}

/** Serves a revision from the cache alone: refs/ for branches and tags, then the snapshot's files. */
async function fromCache(paths: RepoCachePaths, ctx: HubRequestContext, selection: HubFileSelection, why: string): Promise<HubModel> {
  const commitSha = await cachedCommitSha(paths, ctx.revision);
  if (commitSha === undefined || !(await exists(paths.snapshot(commitSha)))) {
    throw new HubOfflineMissError(ctx, `not in the cache at ${paths.storage} (${why}); fetch it once with the Hub reachable`);
  }
  for (const file of selection.require ?? []) {
    if (!(await exists(paths.pointer(commitSha, file)))) {
      throw new HubOfflineMissError({ ...ctx, file }, `snapshot ${commitSha} in the cache lacks this file (${why})`);
    }
  }
  const dir = paths.snapshot(commitSha);
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files: string[] = [];
  for (const e of entries) {
    if (e.isDirectory()) continue;
    const file = relative(dir, join(e.parentPath, e.name)).split("\\").join("/");
    const wanted = isSelected(file, selection);
    // A link whose blob is gone is not a cached file.
    if (wanted && (await exists(join(dir, file)))) files.push(file);
  }
  return { dir, repo: ctx.repo, revision: ctx.revision, commitSha, files: files.sort(), fromCache: true, downloadedBytes: 0 };
}
