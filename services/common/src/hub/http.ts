/**
 * The Hub's HTTP protocol as huggingface_hub (Python) speaks it: the revision API, HEAD on
 * `resolve` URLs for a file's ETag / size / commit, and the `X-Error-Code` header that tells
 * a missing repository from a missing revision, file or a gated repository.
 */
import {
  type HubError,
  type HubErrorContext,
  HubEntryNotFoundError,
  HubGatedError,
  HubRepoNotFoundError,
  HubRevisionNotFoundError,
  HubUnavailableError,
} from "./errors.ts";

/** What every request needs: where, as whom, and for which repository and revision (for errors). */
export interface HubRequestContext extends HubErrorContext {
  readonly endpoint: string;
  readonly token: string | undefined;
  readonly fetch: typeof fetch;
  readonly signal: AbortSignal | undefined;
}

/** A revision resolved by the revision API. */
export interface RevisionInfo {
  readonly commitSha: string;
  /** Every file path in the repository at that commit (`siblings[].rfilename`). */
  readonly files: readonly string[];
}

/** What HEAD on a `resolve` URL says about one file. */
export interface FileMetadata {
  /** X-Linked-Etag (LFS: sha256 of the content) or ETag (git blob sha1), unquoted. */
  readonly etag: string;
  readonly size: number;
  /** X-Repo-Commit. */
  readonly commitSha: string | undefined;
  /** Where to GET the content: the resolve URL, or the redirect target (a CDN for LFS files). */
  readonly url: string;
}

const MAX_REDIRECTS = 5;
const USER_AGENT = "shoal-hub-client/1";

/** Headers for a request to `url`: the token goes only to the endpoint's own origin (never to a CDN). */
export function hubHeaders(ctx: HubRequestContext, url: string, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { "user-agent": USER_AGENT, ...extra };
  if (ctx.token !== undefined && new URL(url).origin === new URL(ctx.endpoint).origin) headers.authorization = `Bearer ${ctx.token}`;
  return headers;
}

/** `fetch` with network failures turned into HubUnavailableError (aborts pass through). */
export async function hubFetch(ctx: HubRequestContext, url: string, init: RequestInit, file?: string): Promise<Response> {
  try {
    return await ctx.fetch(url, { ...init, signal: init.signal ?? ctx.signal ?? null });
  } catch (err) {
    if (ctx.signal?.aborted) throw err;
    throw new HubUnavailableError({ ...ctx, file }, `cannot reach ${new URL(url).origin}: ${(err as Error).message}`, { cause: err });
  }
}

/** Turns a failed Hub response into the matching typed error (after huggingface_hub's hf_raise_for_status). */
export function errorFromResponse(res: Response, ctx: HubRequestContext, file?: string): HubError {
  const code = res.headers.get("x-error-code");
  const message = res.headers.get("x-error-message") ?? "";
  const at = { repo: ctx.repo, revision: ctx.revision, file };
  if (code === "RevisionNotFound") return new HubRevisionNotFoundError(at);
  if (code === "EntryNotFound" && file !== undefined) return new HubEntryNotFoundError({ ...at, file });
  if (code === "GatedRepo") return new HubGatedError(at, res.status, ctx.token !== undefined);
  // The Hub answers 401 RepoNotFound for private repositories too, so as not to reveal them.
  if (code === "RepoNotFound" || (res.status === 404 && file === undefined)) return new HubRepoNotFoundError(at, message);
  if (res.status === 401 || res.status === 403) return new HubGatedError(at, res.status, ctx.token !== undefined);
  if (res.status === 404 && file !== undefined) return new HubEntryNotFoundError({ ...at, file });
  return new HubUnavailableError(at, `HTTP ${res.status} from ${new URL(res.url || ctx.endpoint).origin}${message === "" ? "" : `: ${message}`}`);
}

function repoPath(repo: string): string {
  return repo.split("/").map(encodeURIComponent).join("/");
}

/** `{endpoint}/{repo}/resolve/{revision}/{file}`, the revision quoted whole (as huggingface_hub's hf_hub_url). */
export function resolveUrl(endpoint: string, repo: string, revision: string, file: string): string {
  return `${endpoint}/${repoPath(repo)}/resolve/${encodeURIComponent(revision)}/${file.split("/").map(encodeURIComponent).join("/")}`;
}

/** `GET /api/models/{repo}/revision/{revision}` → the commit sha and the repository's file list. */
export async function fetchRevisionInfo(ctx: HubRequestContext): Promise<RevisionInfo> {
  const url = `${ctx.endpoint}/api/models/${repoPath(ctx.repo)}/revision/${encodeURIComponent(ctx.revision)}`;
  const res = await hubFetch(ctx, url, { headers: hubHeaders(ctx, url, { accept: "application/json" }) });
  if (!res.ok) {
    await res.body?.cancel();
    throw errorFromResponse(res, ctx);
  }
  const body = (await res.json().catch(() => undefined)) as { sha?: unknown; siblings?: unknown } | undefined;
  const sha = body?.sha;
  if (typeof sha !== "string" || !/^[0-9a-f]{40}$/.test(sha)) {
    throw new HubUnavailableError(ctx, `the revision API at ${ctx.endpoint} answered without a commit sha`);
  }
  const siblings = Array.isArray(body?.siblings) ? (body.siblings as unknown[]) : [];
  const files = siblings.flatMap((s) => {
    const name = (s as { rfilename?: unknown } | null)?.rfilename;
    return typeof name === "string" ? [name] : [];
  });
  return { commitSha: sha, files };
}

/** `W/"abc"` and `"abc"` → `abc` (huggingface_hub's _normalize_etag). */
export function normalizeEtag(etag: string | null): string | undefined {
  if (etag === null) return undefined;
  return etag.replace(/^W\//, "").replace(/^"|"$/g, "");
}

/**
 * HEAD on the file's resolve URL at a commit. Redirects within the endpoint's origin (a renamed
 * repository) are followed; one to another origin (LFS content on a CDN) is not: its headers carry
 * X-Linked-Etag and X-Linked-Size, and its Location is where to download from.
 */
export async function fetchFileMetadata(ctx: HubRequestContext, commitSha: string, file: string): Promise<FileMetadata> {
  let url = resolveUrl(ctx.endpoint, ctx.repo, commitSha, file);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    // identity: a compressed answer would hide the real size.
    const headers = hubHeaders(ctx, url, { "accept-encoding": "identity" });
    const res = await hubFetch(ctx, url, { method: "HEAD", headers, redirect: "manual" }, file);
    const location = res.headers.get("location");
    const redirected = res.status >= 300 && res.status < 400 && location !== null;
    if (redirected && new URL(location, url).origin === new URL(url).origin) {
      url = new URL(location, url).toString();
      continue;
    }
    if (!redirected && !res.ok) throw errorFromResponse(res, ctx, file);
    const etag = normalizeEtag(res.headers.get("x-linked-etag") ?? res.headers.get("etag"));
    const sizeHeader = res.headers.get("x-linked-size") ?? (redirected ? null : res.headers.get("content-length"));
    const size = sizeHeader === null ? Number.NaN : Number(sizeHeader);
    if (etag === undefined || etag === "" || !Number.isSafeInteger(size) || size < 0) {
      throw new HubUnavailableError({ ...ctx, file }, `${new URL(url).origin} sent no ETag or size for the file; is HF_ENDPOINT a Hub?`);
    }
    return { etag, size, commitSha: res.headers.get("x-repo-commit") ?? undefined, url: redirected ? new URL(location, url).toString() : url };
  }
  throw new HubUnavailableError({ ...ctx, file }, `more than ${MAX_REDIRECTS} redirects`);
}
