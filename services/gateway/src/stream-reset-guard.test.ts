import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { Req, Res } from "./http-types.ts";
import { guardStreamResets, RAPID_RESET_MS, REFUSED_MESSAGE } from "./stream-reset-guard.ts";

/** A stand-in HTTP/2 request on `session` and its response: records what it was answered. */
function h2Request(session: object): { req: Req; res: Res; answered: number[] } {
  const answered: number[] = [];
  const stream = Object.assign(new EventEmitter(), { session, close: () => undefined });
  const req = Object.assign(new EventEmitter(), { stream, headers: { "content-type": "application/proto" } });
  const res = { writeHead: (status: number) => answered.push(status), end: () => undefined };
  return { req: req as unknown as Req, res: res as unknown as Res, answered };
}

test("a connection's client resets spend its allowance; then its new streams are refused until it refills; others are untouched", () => {
  let now = 0;
  const handled: object[] = [];
  const guard = guardStreamResets(
    (req) => handled.push(req),
    { streamResetBurst: 3, streamResetsPerSecond: 2 },
    () => now,
  );
  const greedy = {};
  const polite = {};
  for (let i = 0; i < 3; i++) {
    const { req, res } = h2Request(greedy);
    guard(req, res);
    (req as unknown as EventEmitter).emit("aborted");
  }
  assert.equal(handled.length, 3);
  const refused = h2Request(greedy);
  guard(refused.req, refused.res);
  assert.deepEqual(refused.answered, [429]);
  assert.equal(handled.length, 3);
  // Another connection has its own allowance.
  const other = h2Request(polite);
  guard(other.req, other.res);
  assert.equal(handled.length, 4);
  // Half a second refills one reset at 2/s: served again.
  now = 500;
  const again = h2Request(greedy);
  guard(again.req, again.res);
  assert.deepEqual([again.answered, handled.length], [[], 5]);
  // Streams that end normally cost nothing.
  for (let i = 0; i < 10; i++) {
    const { req, res } = h2Request(greedy);
    guard(req, res);
  }
  assert.equal(handled.length, 15);
});

test("a reset of a stream that lived past RAPID_RESET_MS (a caller's own deadline) does not count", () => {
  let now = 0;
  const handled: object[] = [];
  const guard = guardStreamResets(
    (req) => handled.push(req),
    { streamResetBurst: 1, streamResetsPerSecond: 0.001 },
    () => now,
  );
  const session = {};
  for (let i = 0; i < 5; i++) {
    const { req, res } = h2Request(session);
    guard(req, res);
    now += RAPID_RESET_MS;
    (req as unknown as EventEmitter).emit("aborted");
  }
  const { req, res, answered } = h2Request(session);
  guard(req, res);
  assert.deepEqual([handled.length, answered], [6, []]);
});

test("HTTP/1.1 requests pass through", () => {
  const handled: unknown[] = [];
  const guard = guardStreamResets((req) => handled.push(req), { streamResetBurst: 1, streamResetsPerSecond: 1 });
  for (let i = 0; i < 5; i++) guard(new EventEmitter() as unknown as Req, {} as Res);
  assert.equal(handled.length, 5);
});

/** Opens a stream on `client` and resolves with its response headers (or the reset that ended it). */
function call(client: http2.ClientHttp2Session, contentType: string): Promise<{ headers?: http2.IncomingHttpHeaders; body: string; rst?: number }> {
  return new Promise((resolve) => {
    const s = client.request({ ":method": "POST", ":path": "/shoal.v1.InferenceService/Embed", "content-type": contentType });
    let headers: http2.IncomingHttpHeaders | undefined;
    let body = "";
    s.on("response", (h) => {
      headers = h;
    });
    s.setEncoding("utf8");
    s.on("data", (d: string) => {
      body += d;
    });
    s.on("close", () => resolve({ ...(headers ? { headers } : {}), body, ...(s.rstCode ? { rst: s.rstCode } : {}) }));
    s.on("error", () => undefined);
    s.end("x");
  });
}

test("over a real HTTP/2 connection: once the allowance is spent, gRPC calls get a trailers-only ResourceExhausted and Connect calls 429 resource_exhausted", async () => {
  const server = http2.createServer(
    guardStreamResets(
      // Answers nothing for a while, as a call waiting on a worker does.
      (_req, res) => setTimeout(() => res.end(), 5_000).unref(),
      { streamResetBurst: 2, streamResetsPerSecond: 0.001 },
    ),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const client = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  try {
    for (let i = 0; i < 2; i++) {
      const s = client.request({ ":method": "POST", ":path": "/shoal.v1.InferenceService/Embed", "content-type": "application/grpc" });
      s.on("error", () => undefined);
      await new Promise((r) => setTimeout(r, 20));
      s.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((r) => s.once("close", r));
    }
    // Give the server the two resets before the next stream.
    await new Promise((r) => setTimeout(r, 50));
    const grpc = await call(client, "application/grpc+proto");
    assert.equal(grpc.headers?.[":status"], 200);
    assert.equal(grpc.headers?.["grpc-status"], "8");
    assert.equal(decodeURIComponent(String(grpc.headers?.["grpc-message"])), REFUSED_MESSAGE);
    const connect = await call(client, "application/proto");
    assert.equal(connect.headers?.[":status"], 429);
    assert.deepEqual(JSON.parse(connect.body), { code: "resource_exhausted", message: REFUSED_MESSAGE });
  } finally {
    client.destroy();
    server.close();
  }
});
