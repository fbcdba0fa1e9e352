import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { createCors } from "./cors.ts";

describe("CORS policy (real HTTP server on port 0)", () => {
  const cors = createCors(["https://app.example.com", "http://localhost:5173"]);
  const server = http.createServer((req, res) => {
    if (cors.handle(req, res)) return;
    (res as http.ServerResponse).writeHead(200, { "content-type": "text/plain" });
    res.end("routed\n");
  });
  let base = "";
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  const preflight = (path: string, origin: string, headers = "content-type"): Promise<Response> =>
    fetch(`${base}${path}`, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": headers } });

  test("a listed origin is echoed (with Vary: Origin) on preflights and on calls", async () => {
    const pre = await preflight("/shoal.v1.ModelService/ListModels", "https://app.example.com", "content-type,traceparent,tracestate,x-unknown");
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), "https://app.example.com");
    assert.match(pre.headers.get("vary") ?? "", /Origin/);
    const allowed = pre.headers.get("access-control-allow-headers")!.split(", ");
    assert.ok(allowed.includes("traceparent") && allowed.includes("tracestate") && allowed.includes("connect-protocol-version"));
    assert.ok(!allowed.includes("x-unknown"), "only known headers are allowed");
    const call = await fetch(`${base}/x`, { method: "POST", headers: { origin: "http://localhost:5173" } });
    assert.equal(await call.text(), "routed\n");
    assert.equal(call.headers.get("access-control-allow-origin"), "http://localhost:5173");
    assert.match(call.headers.get("access-control-expose-headers") ?? "", /shoal-total-ms/);
  });

  test("another origin: preflight refused with 403, calls get no CORS headers (the browser blocks them)", async () => {
    const pre = await preflight("/shoal.v1.ModelService/ListModels", "https://evil.example");
    assert.equal(pre.status, 403);
    assert.equal(pre.headers.get("access-control-allow-origin"), null);
    const call = await fetch(`${base}/x`, { method: "POST", headers: { origin: "https://evil.example" } });
    assert.equal(call.status, 200);
    assert.equal(call.headers.get("access-control-allow-origin"), null);
  });

  test("the OpenAI SDKs' x-stainless-* headers are allowed under /v1/ only", async () => {
    const openai = await preflight("/v1/embeddings", "https://app.example.com", "authorization,x-stainless-lang,openai-organization");
    assert.match(openai.headers.get("access-control-allow-headers") ?? "", /x-stainless-lang, openai-organization$/);
    const connect = await preflight("/shoal.v1.ModelService/ListModels", "https://app.example.com", "x-stainless-lang");
    assert.doesNotMatch(connect.headers.get("access-control-allow-headers") ?? "", /x-stainless/);
  });

  test("'*' answers every origin with '*'; requests without Origin pass through untouched", async () => {
    const any = createCors(["*"]);
    const s = http.createServer((req, res) => (any.handle(req, res) ? undefined : res.end("ok")));
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/`;
    try {
      const pre = await fetch(url, { method: "OPTIONS", headers: { origin: "https://x.test", "access-control-request-method": "POST" } });
      assert.equal(pre.headers.get("access-control-allow-origin"), "*");
      assert.equal(pre.headers.get("vary"), null);
      const plain = await fetch(url);
      assert.equal(plain.headers.get("access-control-allow-origin"), null);
    } finally {
      s.closeAllConnections();
      s.close();
    }
  });
});
