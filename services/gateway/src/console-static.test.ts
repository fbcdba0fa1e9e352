import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createConsoleStatic, OUTSIDE_ROOT } from "./console-static.ts";

/**
 * One GET over a raw socket with `target` written byte for byte: no client URL parser normalises
 * `..` or `%2e%2e` away before the server sees it (fetch would).
 */
function rawGet(url: string, target: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}

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

  test("redirect from /console, 404 for missing files, 405 for POST", async () => {
    const r = await fetch(`${built.url}/console?gateway=x`, { redirect: "manual" });
    assert.equal(r.status, 301);
    assert.equal(r.headers.get("location"), "/console/?gateway=x");
    const missing = await fetch(`${built.url}/console/nope.js`);
    assert.equal(missing.status, 404);
    assert.equal(await missing.text(), "not found\n");
    assert.equal((await fetch(`${built.url}/console/`, { method: "POST" })).status, 405);
  });

  test("raw request targets leaving the root, literal or percent-encoded, get the guard's own 403; `..` that stays inside is served", async () => {
    for (const target of [
      "/console/../secret.txt",
      "/console/assets/../../secret.txt",
      "/console/%2e%2e/secret.txt",
      "/console/%2E%2E%2Fsecret.txt",
      "/console/%2e%2e%2fsecret.txt",
      "/console/..%2fsecret.txt",
      "/console/assets/..%2f..%2fsecret.txt",
      "/console/assets%2f%2e%2e%2f%2e%2e%2fsecret.txt",
      "/console/../../../../../../etc/passwd",
      "/console/index.html%00.png",
    ]) {
      const res = await rawGet(built.url, target);
      assert.deepEqual(res, { status: 403, body: OUTSIDE_ROOT }, target);
    }
    // The same raw client, a `..` that resolves inside the root: served, so the 403s above are the
    // guard judging where a path lands, not a refusal of every `..`.
    const inside = await rawGet(built.url, "/console/assets/%2e%2e/index.html");
    assert.equal(inside.status, 200);
    assert.equal(inside.body, "<!doctype html><title>x</title>");
    // fetch would have normalised the target before sending it: what the old test sent.
    assert.notEqual((await fetch(`${built.url}/console/%2e%2e/secret.txt`)).status, 403, "fetch never reached the guard with this path");
  });

  test("a console that is not built gets a 404 that says how to build it", async () => {
    const res = await fetch(`${empty.url}/console/`);
    assert.equal(res.status, 404);
    assert.match(await res.text(), /npm run build -w services\/console/);
  });
});
