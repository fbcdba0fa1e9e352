/**
 * One blob's download: resumable (`Range` on a kept `.incomplete` file), verified against the
 * ETag before it enters the cache, and safe when several processes share a cache without a lock:
 * a downloader claims the resumable file by renaming it to a name of its own, so no two ever
 * write the same file (a second downloader starts afresh, like huggingface_hub's per-process
 * temporary files), and the verified file is renamed into `blobs/<etag>` atomically.
 */
import { createHash, type Hash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rename, stat } from "node:fs/promises";
import { HubDownloadError, HubError } from "./errors.ts";
import { errorFromResponse, hubFetch, hubHeaders, type HubRequestContext } from "./http.ts";
import { removeQuietly } from "./cache.ts";

/** Progress of one file: bytes on disk so far (resumed bytes included) of `total`. */
export interface HubProgress {
  readonly repo: string;
  readonly file: string;
  readonly bytes: number;
  readonly total: number;
}

/** What to download and where. */
export interface BlobDownload {
  readonly ctx: HubRequestContext;
  readonly file: string;
  readonly url: string;
  readonly etag: string;
  readonly size: number;
  /** `blobs/<etag>`; the resumable partial file is this plus `.incomplete`. */
  readonly blobPath: string;
  readonly onProgress: ((p: HubProgress) => void) | undefined;
  /** Abort an attempt that receives nothing for this long, then resume it. */
  readonly idleTimeoutMs: number;
  /** Attempts in a row that add no byte before giving up. */
  readonly maxStalledAttempts: number;
}

const MAX_REDIRECTS = 5;

/** How the ETag names the content: LFS files by sha256, regular files by git blob sha1, others unchecked. */
function contentHasher(etag: string, size: number): Hash | undefined {
  if (/^[0-9a-f]{64}$/.test(etag)) return createHash("sha256");
  if (/^[0-9a-f]{40}$/.test(etag)) return createHash("sha1").update(`blob ${size}\0`);
  return undefined;
}

async function hashExisting(path: string, hasher: Hash | undefined): Promise<void> {
  if (hasher === undefined) return;
  for await (const chunk of createReadStream(path)) hasher.update(chunk as Buffer);
}

/** Takes over the resumable partial file if there is one; returns the private path and its length. */
async function claimPartial(blobPath: string): Promise<{ path: string; offset: number }> {
  const own = `${blobPath}.${randomBytes(4).toString("hex")}.incomplete`;
  try {
    await rename(`${blobPath}.incomplete`, own);
    return { path: own, offset: (await stat(own)).size };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await (await open(own, "w")).close();
    return { path: own, offset: 0 };
  }
}

/** GET with manual redirects so the token is dropped on a cross-origin hop (a CDN's signed URL). */
async function getFollowing(d: BlobDownload, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
  let url = d.url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const res = await hubFetch(d.ctx, url, { headers: hubHeaders(d.ctx, url, headers), redirect: "manual", signal }, d.file);
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || location === null) return res;
    await res.body?.cancel();
    url = new URL(location, url).toString();
  }
  throw new HubDownloadError({ ...d.ctx, file: d.file }, `more than ${MAX_REDIRECTS} redirects`);
}

/**
 * Downloads one blob into `blobPath`, resuming a kept partial file, retrying cut-off transfers with
 * `Range`, and verifying the content against the ETag.
 * @throws HubDownloadError when the content does not match (the file is deleted) or transfers keep
 *   failing (the partial file is kept for the next attempt to resume)
 */
export async function downloadBlob(d: BlobDownload): Promise<number> {
  const at = { repo: d.ctx.repo, revision: d.ctx.revision, file: d.file };
  const partial = await claimPartial(d.blobPath);
  let offset = partial.offset;
  let hasher = contentHasher(d.etag, d.size);
  let received = 0;
  let keepPartial = true;
  const fh = await open(partial.path, "r+");
  try {
    if (offset > d.size) {
      offset = 0;
      await fh.truncate(0);
    }
    await hashExisting(partial.path, hasher);
    let stalled = 0;
    let lastError: unknown;
    while (offset < d.size) {
      if (stalled >= d.maxStalledAttempts) {
        throw new HubDownloadError(at, `download cut off ${stalled} times, at ${offset} of ${d.size} bytes; kept for resuming`, { cause: lastError });
      }
      const before = offset;
      const attempt = new AbortController();
      const signal = d.ctx.signal === undefined ? attempt.signal : AbortSignal.any([attempt.signal, d.ctx.signal]);
      let idle = setTimeout(() => attempt.abort(new Error(`no data for ${d.idleTimeoutMs} ms`)), d.idleTimeoutMs);
      try {
        const res = await getFollowing(d, offset > 0 ? { range: `bytes=${offset}-` } : {}, signal);
        if (res.status === 200 && offset > 0) {
          // The server ignored Range: start over rather than append the whole file to a prefix.
          offset = 0;
          await fh.truncate(0);
          hasher = contentHasher(d.etag, d.size);
        } else if (res.status === 206) {
          const start = /^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "")?.[1];
          if (Number(start) !== offset) throw new HubDownloadError(at, `asked for bytes from ${offset}, got ${res.headers.get("content-range")}`);
        } else if (!res.ok) {
          await res.body?.cancel();
          const error = errorFromResponse(res, d.ctx, d.file);
          // 5xx, 408 and 429 are worth another attempt (as huggingface_hub's backoff); the rest is final.
          if (res.status < 500 && res.status !== 408 && res.status !== 429) throw error;
          throw new Error(error.message);
        }
        if (res.body === null) throw new Error("response without a body");
        for await (const chunk of res.body) {
          clearTimeout(idle);
          idle = setTimeout(() => attempt.abort(new Error(`no data for ${d.idleTimeoutMs} ms`)), d.idleTimeoutMs);
          const bytes = chunk as Uint8Array;
          if (offset + bytes.byteLength > d.size) {
            throw new HubDownloadError(at, `server sent more than the ${d.size} bytes announced`);
          }
          await fh.write(bytes, 0, bytes.byteLength, offset);
          hasher?.update(bytes);
          offset += bytes.byteLength;
          received += bytes.byteLength;
          d.onProgress?.({ repo: d.ctx.repo, file: d.file, bytes: offset, total: d.size });
        }
      } catch (err) {
        if (d.ctx.signal?.aborted) throw err;
        if (err instanceof HubDownloadError) {
          keepPartial = false;
          throw err;
        }
        if (err instanceof HubError) throw err;
        lastError = err;
      } finally {
        clearTimeout(idle);
      }
      stalled = offset > before ? 0 : stalled + 1;
      if (offset < d.size) await new Promise((r) => setTimeout(r, Math.min(1000, 100 * (stalled + 1))));
    }
    const actual = hasher?.digest("hex");
    if (actual !== undefined && actual !== d.etag) {
      keepPartial = false;
      throw new HubDownloadError(at, `content does not match its ETag (expected ${d.etag}, got ${actual}); the download was discarded`);
    }
    await fh.close();
    await rename(partial.path, d.blobPath);
    keepPartial = false;
    return received;
  } finally {
    await fh.close().catch(() => undefined);
    if (keepPartial && offset > 0) {
      await rename(partial.path, `${d.blobPath}.incomplete`).catch(() => removeQuietly(partial.path));
    } else {
      await removeQuietly(partial.path);
    }
  }
}
