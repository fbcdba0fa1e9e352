import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { test } from "node:test";
import { createDualServer } from "./dual-server.ts";

test("one port answers HTTP/1.1 and h2c clients", async () => {
  const server = createDualServer((req, res) => {
    (res as http.ServerResponse).writeHead(200, { "content-type": "text/plain" });
    res.end(`v${req.httpVersion} ${req.url}`);
  });
  const { port } = await server.listen(0, "127.0.0.1");
  try {
    const h1 = await new Promise<string>((ok, fail) => {
      http
        .get(`http://127.0.0.1:${port}/one`, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => ok(body));
        })
        .on("error", fail);
    });
    assert.equal(h1, "v1.1 /one");

    const session = http2.connect(`http://127.0.0.1:${port}`);
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
  } finally {
    await server.close();
  }
});
