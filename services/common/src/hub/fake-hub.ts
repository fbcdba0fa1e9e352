/**
 * A Hub-shaped HTTP server for tests (the real Hub is not reachable from CI): serves repositories
 * held in memory or read from folders, in the protocol huggingface_hub and fetchHubModel speak —
 * the revision and tree APIs, `resolve` with ETag / X-Linked-Etag / X-Linked-Size / X-Repo-Commit,
 * LFS files through a 302 to a CDN-like second origin, Range requests, `X-Error-Code` errors — plus the
 * faults tests need: a gated repository, a transfer cut off half way, content that does not match
 * its ETag. Listens on 127.0.0.1, port 0. Not for production use.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join, relative } from "node:path";

/** One request as the server saw it. */
export interface FakeHubRequest {
  readonly method: string;
  readonly path: string;
  readonly range: string | undefined;
  readonly authorized: boolean;
}

/** Repository content: path → bytes (or text), or a folder on disk laid out as a Hub repository. */
export type FakeHubContent = Readonly<Record<string, string | Uint8Array>> | { readonly dir: string };

/** A running fake Hub. */
export interface FakeHub {
  /** `http://127.0.0.1:<port>`: use as HF_ENDPOINT. */
  readonly url: string;
  /** Every request received, in order. */
  readonly requests: FakeHubRequest[];
  /** Adds a commit to `repo` (created on first use) and points `refs` (default `["main"]`) at it; returns its sha. */
  addRevision(repo: string, content: FakeHubContent, options?: { refs?: readonly string[] }): Promise<string>;
  /** Points a branch or tag at a commit (moves `main`, say). */
  setRef(repo: string, ref: string, sha: string): void;
  /** Makes `repo` gated: its files answer 401 without a token and 403 with another than `token`. */
  gate(repo: string, token: string): void;
  /** The next GET of `file`'s content (any revision of `repo`) closes the connection half way through. */
  cutOffOnce(repo: string, file: string): void;
  /** `file`'s content is served with one byte flipped, under its true ETag. */
  corrupt(repo: string, file: string): void;
  /** GET requests for `repo`'s file content (resolve and CDN), optionally only those of `file`. */
  contentRequests(repo: string, file?: string): FakeHubRequest[];
  close(): Promise<void>;
}

interface StoredFile {
  readonly content: Buffer;
  readonly sha256: string;
  readonly gitSha1: string;
  readonly lfs: boolean;
}

interface Repo {
  readonly commits: Map<string, Map<string, StoredFile>>;
  readonly refs: Map<string, string>;
  gatedToken: string | undefined;
}

const LFS_EXTENSIONS = /\.(onnx|onnx_data|safetensors|bin|pt|h5|msgpack)$/;
const LFS_MIN_BYTES = 1 << 20;

function gitBlobSha1(content: Uint8Array): string {
  return createHash("sha1").update(`blob ${content.byteLength}\0`).update(content).digest("hex");
}

function storeFile(path: string, content: Uint8Array): StoredFile {
  const buffer = Buffer.from(content);
  const sha256 = createHash("sha256").update(buffer).digest("hex");
  const lfs = LFS_EXTENSIONS.test(path) || buffer.byteLength >= LFS_MIN_BYTES;
  // An LFS file's git blob is its pointer file.
  const gitSha1 = lfs ? gitBlobSha1(Buffer.from(`oid sha256:${sha256}\nsize ${buffer.byteLength}\n`)) : gitBlobSha1(buffer);
  return { content: buffer, sha256, gitSha1, lfs };
}

async function readContent(content: FakeHubContent): Promise<Map<string, StoredFile>> {
  const files = new Map<string, StoredFile>();
  if ("dir" in content && typeof content.dir === "string") {
    const root = content.dir;
    for (const e of await readdir(root, { recursive: true, withFileTypes: true })) {
      if (!e.isFile()) continue;
      const path = relative(root, join(e.parentPath, e.name)).split("\\").join("/");
      files.set(path, storeFile(path, await readFile(join(root, path))));
    }
  } else {
    for (const [path, data] of Object.entries(content as Record<string, string | Uint8Array>)) {
      files.set(path, storeFile(path, typeof data === "string" ? Buffer.from(data) : data));
    }
  }
  return files;
}

function sendError(res: ServerResponse, status: number, code: string, message: string, commit?: string): void {
  res.statusCode = status;
  res.setHeader("x-error-code", code);
  res.setHeader("x-error-message", message);
  if (commit !== undefined) res.setHeader("x-repo-commit", commit);
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ error: message }));
}

/** Starts a fake Hub on 127.0.0.1:0. */
export async function startFakeHub(): Promise<FakeHub> {
  const repos = new Map<string, Repo>();
  const requests: FakeHubRequest[] = [];
  const cutOff = new Set<string>();
  const corrupted = new Set<string>();
  let counter = 0;

  const repoOf = (name: string): Repo => {
    let repo = repos.get(name);
    if (repo === undefined) {
      repo = { commits: new Map(), refs: new Map(), gatedToken: undefined };
      repos.set(name, repo);
    }
    return repo;
  };
  const etagsOf = (repoName: string, file: string): string[] =>
    [...(repos.get(repoName)?.commits.values() ?? [])].flatMap((c) => {
      const f = c.get(file);
      return f === undefined ? [] : [f.sha256];
    });
  const resolveRev = (repo: Repo, rev: string): string | undefined => repo.refs.get(rev) ?? (repo.commits.has(rev) ? rev : undefined);

  /** Sends a file's bytes honouring Range, with the cut-off and corruption faults (per repository: repos may share content). */
  const sendContent = (req: IncomingMessage, res: ServerResponse, file: StoredFile, repoName: string): void => {
    let body = file.content;
    if (corrupted.has(`${repoName}\0${file.sha256}`)) {
      body = Buffer.from(body);
      if (body.byteLength > 0) body[0] = (body[0] ?? 0) ^ 0xff;
    }
    const total = body.byteLength;
    let start = 0;
    let end = total - 1;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (range !== null) {
      start = Number(range[1]);
      end = range[2] === "" ? total - 1 : Math.min(Number(range[2]), total - 1);
      if (start >= total) {
        res.writeHead(416, { "content-range": `bytes */${total}` }).end();
        return;
      }
      res.statusCode = 206;
      res.setHeader("content-range", `bytes ${start}-${end}/${total}`);
    } else {
      res.statusCode = 200;
    }
    res.setHeader("accept-ranges", "bytes");
    res.setHeader("content-length", String(end - start + 1));
    res.setHeader("content-type", "application/octet-stream");
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const slice = body.subarray(start, end + 1);
    if (cutOff.delete(`${repoName}\0${file.sha256}`) && slice.byteLength > 1) {
      // Half the body, then the connection goes: the client sees a transfer cut off mid-way.
      res.flushHeaders();
      res.write(slice.subarray(0, Math.floor(slice.byteLength / 2)), () => res.socket?.destroy());
      return;
    }
    res.end(slice);
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const auth = req.headers.authorization;
    requests.push({ method: req.method ?? "GET", path: url.pathname, range: req.headers.range, authorized: auth !== undefined });
    const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);

    // The LFS "CDN": content by sha256, no token (the real one serves signed URLs).
    if (parts[0] === "lfs-cdn" && parts.length === 4) {
      const repo = repos.get(`${parts[1]}/${parts[2]}`);
      const file = [...(repo?.commits.values() ?? [])].flatMap((c) => [...c.values()]).find((f) => f.sha256 === parts[3]);
      if (file === undefined) return sendError(res, 404, "EntryNotFound", "no such object");
      return sendContent(req, res, file, `${parts[1]}/${parts[2]}`);
    }

    if (parts[0] === "api" && parts[1] === "models" && parts.length >= 4) {
      const name = `${parts[2]}/${parts[3]}`;
      const repo = repos.get(name);
      if (repo === undefined) {
        return auth === undefined
          ? sendError(res, 401, "RepoNotFound", "Invalid username or password.")
          : sendError(res, 404, "RepoNotFound", "Repository not found");
      }
      const kind = parts[4];
      const rev = parts.length === 4 ? "main" : (parts[5] ?? "");
      const sha = resolveRev(repo, rev);
      if (sha === undefined) return sendError(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
      const files = repo.commits.get(sha) ?? new Map<string, StoredFile>();
      if (parts.length === 4 || (kind === "revision" && parts.length === 6)) {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            _id: sha.slice(0, 24),
            id: name,
            modelId: name,
            sha,
            private: false,
            gated: repo.gatedToken === undefined ? false : "manual",
            disabled: false,
            tags: [],
            siblings: [...files.keys()].sort().map((rfilename) => ({ rfilename })),
          }),
        );
        return;
      }
      if (kind === "tree") {
        const prefix = parts.slice(6).join("/");
        const under = [...files.keys()].filter((p) => prefix === "" || p.startsWith(`${prefix}/`)).sort();
        const dirs = new Set(
          under.flatMap((p) =>
            p
              .split("/")
              .slice(0, -1)
              .map((_, i, segs) => segs.slice(0, i + 1).join("/")),
          ),
        );
        const entries = [
          ...[...dirs].filter((d) => d !== prefix).map((path) => ({ type: "directory", oid: gitBlobSha1(Buffer.from(path)), size: 0, path })),
          ...under.map((path) => {
            const f = files.get(path)!;
            const lfs = f.lfs ? { lfs: { oid: f.sha256, size: f.content.byteLength, pointerSize: 128 } } : {};
            return { type: "file", oid: f.gitSha1, size: f.content.byteLength, path, ...lfs };
          }),
        ];
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify(entries));
        return;
      }
      return sendError(res, 404, "NotFound", "unknown API route");
    }

    // {org}/{name}/resolve/{revision}/{path...}
    if (parts.length >= 5 && parts[2] === "resolve") {
      const name = `${parts[0]}/${parts[1]}`;
      const repo = repos.get(name);
      if (repo === undefined) {
        return auth === undefined
          ? sendError(res, 401, "RepoNotFound", "Invalid username or password.")
          : sendError(res, 404, "RepoNotFound", "Repository not found");
      }
      if (repo.gatedToken !== undefined && auth !== `Bearer ${repo.gatedToken}`) {
        const message = `Access to model ${name} is restricted. You must have access to it and be authenticated to access it.`;
        return sendError(res, auth === undefined ? 401 : 403, "GatedRepo", message);
      }
      const rev = parts[3] ?? "";
      const sha = resolveRev(repo, rev);
      if (sha === undefined) return sendError(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
      const path = parts.slice(4).join("/");
      const file = repo.commits.get(sha)?.get(path);
      if (file === undefined) return sendError(res, 404, "EntryNotFound", `${path} does not exist on "${rev}"`, sha);
      res.setHeader("x-repo-commit", sha);
      if (file.lfs) {
        res.writeHead(302, {
          location: `${cdnUrl}/lfs-cdn/${name}/${file.sha256}`,
          etag: `"${file.gitSha1}"`,
          "x-linked-etag": `"${file.sha256}"`,
          "x-linked-size": String(file.content.byteLength),
        });
        res.end();
        return;
      }
      res.setHeader("etag", `"${file.gitSha1}"`);
      return sendContent(req, res, file, name);
    }
    sendError(res, 404, "NotFound", "not a Hub route");
  };

  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    try {
      handle(req, res);
    } catch (err) {
      if (!res.headersSent) sendError(res, 500, "Internal", (err as Error).message);
    }
  };
  // LFS content lives on a second origin, as on the real Hub: clients must not send the token there.
  const [server, cdn] = [createServer(listener), createServer(listener)];
  for (const s of [server, cdn]) await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const cdnUrl = `http://127.0.0.1:${(cdn.address() as AddressInfo).port}`;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    async addRevision(name, content, options = {}) {
      const repo = repoOf(name);
      const files = await readContent(content);
      const listing = [...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([p, f]) => `${p}:${f.gitSha1}`);
      const sha = createHash("sha1")
        .update(`${name}\n${counter++}\n${listing.join("\n")}`)
        .digest("hex");
      repo.commits.set(sha, files);
      for (const ref of options.refs ?? ["main"]) repo.refs.set(ref, sha);
      return sha;
    },
    setRef(name, ref, sha) {
      const repo = repoOf(name);
      if (!repo.commits.has(sha)) throw new Error(`fake hub: ${name} has no commit ${sha}`);
      repo.refs.set(ref, sha);
    },
    gate(name, token) {
      repoOf(name).gatedToken = token;
    },
    cutOffOnce(name, file) {
      for (const etag of etagsOf(name, file)) cutOff.add(`${name}\0${etag}`);
    },
    corrupt(name, file) {
      for (const etag of etagsOf(name, file)) corrupted.add(`${name}\0${etag}`);
    },
    contentRequests(name, file) {
      const shas = new Set(file === undefined ? [] : etagsOf(name, file));
      return requests.filter((r) => {
        if (r.method !== "GET") return false;
        const resolvePrefix = `/${name}/resolve/`;
        if (r.path.startsWith(resolvePrefix)) {
          const afterRevision = r.path.slice(resolvePrefix.length).split("/").slice(1).map(decodeURIComponent).join("/");
          return file === undefined || afterRevision === file;
        }
        if (!r.path.startsWith(`/lfs-cdn/${name}/`)) return false;
        return file === undefined || [...shas].some((s) => r.path.endsWith(`/${s}`));
      });
    },
    async close() {
      for (const s of [server, cdn]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
}
