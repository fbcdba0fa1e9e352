import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createConsoleStatic } from "./console-static.ts";

async function serve(root: string): Promise<{ url: string; close: () => void }> {
  const server = http.createServer(createConsoleStatic(root));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe("console static files (real HTTP server on port 0, files on disk)", () => {
  let dir: string;
  let built: Awaited<ReturnType<typeof serve>>;
  let empty: Awaited<ReturnType<typeof serve>>;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "shoal-console-"));
    await mkdir(join(dir, "dist", "assets"), { recursive: true });
    await writeFile(join(dir, "dist", "index.html"), "<!doctype html><title>x</title>");
    await writeFile(join(dir, "dist", "assets", "index-abc.js"), "console.log(1)");
    await writeFile(join(dir, "dist", "assets", "index-abc.css"), "body{}");
    await writeFile(join(dir, "secret.txt"), "outside the root");
    built = await serve(join(dir, "dist"));
    empty = await serve(join(dir, "missing"));
  });
  after(async () => {
    built?.close();
    empty?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("index, assets with their content types and caching, HEAD and ETag revalidation", async () => {
    const index = await fetch(`${built.url}/console/`);
    assert.equal(index.status, 200);
    assert.equal(index.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(index.headers.get("cache-control"), "no-cache");
    const js = await fetch(`${built.url}/console/assets/index-abc.js`);
    assert.equal(js.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.match(js.headers.get("cache-control") ?? "", /max-age=31536000, immutable/);
    assert.equal(await js.text(), "console.log(1)");
    assert.equal((await fetch(`${built.url}/console/assets/index-abc.css`)).headers.get("content-type"), "text/css; charset=utf-8");
    const head = await fetch(`${built.url}/console/assets/index-abc.js`, { method: "HEAD" });
    assert.equal(head.headers.get("content-length"), "14");
    const again = await fetch(`${built.url}/console/`, { headers: { "if-none-match": index.headers.get("etag")! } });
    assert.equal(again.status, 304);
  });

  test("redirect from /console, 404 for missing files and for paths escaping the root, 405 for POST", async () => {
    const r = await fetch(`${built.url}/console?gateway=x`, { redirect: "manual" });
    assert.equal(r.status, 301);
    assert.equal(r.headers.get("location"), "/console/?gateway=x");
    assert.equal((await fetch(`${built.url}/console/nope.js`)).status, 404);
    for (const path of ["/console/..%2fsecret.txt", "/console/%2e%2e/secret.txt", "/console/assets/..%2f..%2fsecret.txt"]) {
      const res = await fetch(`${built.url}${path}`);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(await res.text(), /outside the root/);
    }
    assert.equal((await fetch(`${built.url}/console/`, { method: "POST" })).status, 405);
  });

  test("a console that is not built gets a 404 that says how to build it", async () => {
    const res = await fetch(`${empty.url}/console/`);
    assert.equal(res.status, 404);
    assert.match(await res.text(), /npm run build -w services\/console/);
  });
});
