import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import http2 from "node:http2";
import { test } from "node:test";
import type { Req, Res } from "./http-types.ts";
import { guardStreamResets, RAPID_RESET_MS } from "./stream-reset-guard.ts";

/** A stand-in HTTP/2 request on `session`: records how its stream was closed. */
function h2Request(session: object): { req: Req; closedWith: number[] } {
  const closedWith: number[] = [];
  const req = Object.assign(new EventEmitter(), { stream: { session, close: (code: number) => closedWith.push(code) } });
  return { req: req as unknown as Req, closedWith };
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
    const { req } = h2Request(greedy);
    guard(req, {} as Res);
    (req as unknown as EventEmitter).emit("aborted");
  }
  assert.equal(handled.length, 3);
  const refused = h2Request(greedy);
  guard(refused.req, {} as Res);
  assert.deepEqual(refused.closedWith, [http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]);
  assert.equal(handled.length, 3);
  // Another connection has its own allowance.
  guard(h2Request(polite).req, {} as Res);
  assert.equal(handled.length, 4);
  // Half a second refills one reset at 2/s: served again.
  now = 500;
  const again = h2Request(greedy);
  guard(again.req, {} as Res);
  assert.deepEqual([again.closedWith, handled.length], [[], 5]);
  // Streams that end normally cost nothing.
  for (let i = 0; i < 10; i++) guard(h2Request(greedy).req, {} as Res);
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
    const { req } = h2Request(session);
    guard(req, {} as Res);
    now += RAPID_RESET_MS;
    (req as unknown as EventEmitter).emit("aborted");
  }
  const { req, closedWith } = h2Request(session);
  guard(req, {} as Res);
  assert.deepEqual([handled.length, closedWith], [6, []]);
});

test("HTTP/1.1 requests pass through", () => {
  const handled: unknown[] = [];
  const guard = guardStreamResets((req) => handled.push(req), { streamResetBurst: 1, streamResetsPerSecond: 1 });
  for (let i = 0; i < 5; i++) guard(new EventEmitter() as unknown as Req, {} as Res);
  assert.equal(handled.length, 5);
});
