import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import type http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { selfSignedCert } from "@shoal/common/self-signed";
import { createTlsServer } from "./tls-server.ts";

let hasOpenssl = true;
try {
  execFileSync("openssl", ["version"], { stdio: "ignore" });
} catch {
  hasOpenssl = false;
}

test("one TLS port answers HTTP/1.1 and h2 by ALPN; plain text is refused", { skip: !hasOpenssl && "openssl CLI not found" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-tls-"));
  const pair = selfSignedCert(dir, "gateway", "DNS:localhost,IP:127.0.0.1");
  const ca = readFileSync(pair.cert);
  const server = createTlsServer(
    (req, res) => {
      (res as http.ServerResponse).writeHead(200, { "content-type": "text/plain" });
      res.end(`v${req.httpVersion} ${req.url}`);
    },
    { cert: ca, key: readFileSync(pair.key) },
  );
  const { port } = await server.listen(0, "127.0.0.1");
  try {
    const h1 = await new Promise<string>((ok, fail) => {
      https
        .get({ host: "127.0.0.1", port, path: "/one", ca, agent: false }, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => ok(body));
        })
        .on("error", fail);
    });
    assert.equal(h1, "v1.1 /one");

    const session = http2.connect(`https://127.0.0.1:${port}`, { ca });
    const h2 = await new Promise<string>((ok, fail) => {
      const req = session.request({ ":path": "/two" });
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => ok(body));
      req.on("error", fail);
      req.end();
    });
    session.close();
    assert.equal(h2, "v2.0 /two");

    await assert.rejects(fetch(`http://127.0.0.1:${port}/three`));
    // An untrusted certificate fails the client's check.
    await assert.rejects(fetch(`https://127.0.0.1:${port}/four`));
  } finally {
    await server.close();
  }
});
