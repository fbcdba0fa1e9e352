import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { extname, resolve, sep } from "node:path";
import { type Req, type Res, writeHead } from "./http-types.ts";

/** Where the gateway serves the web console. */
export const CONSOLE_PATH = "/console/";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

const NOT_BUILT =
  "The Shoal web console is not built.\n" + "Run `npm run build -w services/console` (or set SHOAL_CONSOLE_DIR to a built console) and reload.\n";

/**
 * The answer to a path that leaves the console directory (`..` segments, raw or percent-encoded,
 * or a NUL byte): its own status and wording, so a test can tell the guard answered, not a missing file.
 */
export const OUTSIDE_ROOT = "refused: the path leaves the console directory\n";

/** True for `/console` and everything under `/console/`. */
export function isConsolePath(pathname: string): boolean {
  return pathname === "/console" || pathname.startsWith(CONSOLE_PATH);
}

/**
 * Serves the built console (`services/console/dist`) at `/console/`: GET and HEAD, content types
 * by extension, hashed `assets/` cached for a year, everything else revalidated by ETag, and a
 * 404 that says how to build the console when it is missing; 403 for a path leaving the directory.
 */
export function createConsoleStatic(root: string): (req: Req, res: Res) => void {
  const base = resolve(root);

  function text(res: Res, status: number, body: string, headers: Record<string, string> = {}): void {
    writeHead(res, status, { "content-type": "text/plain; charset=utf-8", "content-length": String(Buffer.byteLength(body)), ...headers });
    res.end(body);
  }

  async function serve(req: Req, res: Res): Promise<void> {
    const [rawPath = "/", query] = (req.url ?? "/").split("?", 2);
    if (rawPath === "/console") return text(res, 301, "moved\n", { location: `${CONSOLE_PATH}${query ? `?${query}` : ""}` });
    if (req.method !== "GET" && req.method !== "HEAD") return text(res, 405, "use GET\n", { allow: "GET, HEAD" });
    let rel: string;
    try {
      rel = decodeURIComponent(rawPath.slice(CONSOLE_PATH.length));
    } catch {
      return text(res, 400, "bad path\n");
    }
    // The raw request target arrives here as sent (Node does not normalise it): `..` segments are
    // resolved after percent-decoding, and whatever lands outside the root is refused.
    const file = resolve(base, rel === "" ? "index.html" : rel);
    if (!file.startsWith(base + sep) || rel.includes("\0")) return text(res, 403, OUTSIDE_ROOT);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) {
      const built = await stat(resolve(base, "index.html")).catch(() => undefined);
      return text(res, 404, built ? "not found\n" : NOT_BUILT);
    }
    const etag = `W/"${info.size.toString(16)}-${Math.floor(info.mtimeMs).toString(16)}"`;
    const immutable = rel.startsWith("assets/");
    const headers: Record<string, string> = {
      "content-type": CONTENT_TYPES[extname(file).toLowerCase()] ?? "application/octet-stream",
      "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
      etag,
      "x-content-type-options": "nosniff",
    };
    if (req.headers["if-none-match"] === etag) {
      writeHead(res, 304, headers);
      res.end();
      return;
    }
    writeHead(res, 200, { ...headers, "content-length": String(info.size) });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    const stream = createReadStream(file);
    stream.once("error", () => res.destroy());
    stream.pipe(res as NodeJS.WritableStream);
  }

  return (req, res) => {
    serve(req, res).catch(() => {
      if (!res.headersSent) text(res, 500, "internal error\n");
      else res.destroy();
    });
  };
}
