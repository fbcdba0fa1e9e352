import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { backoffMs, DEFAULT_RETRY_POLICY, retryAfterMs, withRetries } from "./retry.ts";
import { decodeFloat32Le } from "./index.ts";

test("backoff grows exponentially to its cap, with full jitter", () => {
  const policy = { ...DEFAULT_RETRY_POLICY, initialBackoffMs: 100, maxBackoffMs: 1_000, multiplier: 2 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6].map((n) => backoffMs(policy, n, undefined, () => 1)),
    [100, 200, 400, 800, 1_000, 1_000],
  );
  assert.equal(
    backoffMs(policy, 3, undefined, () => 0.5),
    200,
  );
  assert.equal(
    backoffMs(policy, 3, undefined, () => 0),
    0,
  );
});

test("a server hint replaces the backoff, plus at most 10% jitter", () => {
  const policy = DEFAULT_RETRY_POLICY;
  assert.equal(
    backoffMs(policy, 1, 250, () => 0),
    250,
  );
  assert.equal(
    backoffMs(policy, 1, 250, () => 1),
    275,
  );
  assert.equal(
    backoffMs(policy, 9, 20_000, () => 0),
    20_000,
    "not capped by maxBackoffMs: the deadline bounds it",
  );
});

test("retry hints: retry-after-ms first, then retry-after as seconds or an HTTP date", () => {
  const err = (h: Record<string, string>): ConnectError => new ConnectError("busy", Code.Unavailable, h);
  assert.equal(retryAfterMs(err({ "retry-after-ms": "120" })), 120);
  assert.equal(retryAfterMs(err({ "retry-after-ms": "120", "retry-after": "9" })), 120);
  assert.equal(retryAfterMs(err({ "retry-after": "2" })), 2_000);
  assert.equal(retryAfterMs(err({ "retry-after": "0.5" })), 500);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(retryAfterMs(err({ "retry-after": "Thu, 01 Jan 2026 00:00:03 GMT" }), now), 3_000);
  assert.equal(retryAfterMs(err({ "retry-after": "soon" })), undefined);
  assert.equal(retryAfterMs(err({ "retry-after-ms": "-5" })), undefined);
  assert.equal(retryAfterMs(err({})), undefined);
});

test("float32 little-endian bytes decode from any offset into an aligned copy", () => {
  const v = new Float32Array([1.5, -2.25, 3e-8]);
  const shifted = new Uint8Array(13);
  shifted.set(new Uint8Array(v.buffer), 1);
  const out = decodeFloat32Le(shifted.subarray(1));
  assert.deepEqual(Array.from(out), Array.from(v));
  assert.throws(() => decodeFloat32Le(new Uint8Array(5)), RangeError);
});

test("a Canceled the caller did not ask for (a gateway killed mid-call) is retried as Unavailable; the caller's own cancel is not", async () => {
  const policy = { maxAttempts: 3, initialBackoffMs: 1, maxBackoffMs: 1, multiplier: 1 };
  let calls = 0;
  const served = await withRetries({ policy, deadline: Date.now() + 5_000 }, async () => {
    calls += 1;
    if (calls === 1) throw new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
    return "answered";
  });
  assert.equal(served, "answered");
  assert.equal(calls, 2);

  // Out of attempts: the caller sees Unavailable, a documented code, not Canceled.
  const always = withRetries({ policy, deadline: Date.now() + 5_000 }, async () => {
    throw new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
  });
  await assert.rejects(always, (e: unknown) => e instanceof ConnectError && e.code === Code.Unavailable && /server ended the call/.test(e.message));

  const controller = new AbortController();
  controller.abort();
  let tries = 0;
  const own = withRetries({ policy, deadline: Date.now() + 5_000, signal: controller.signal }, async () => {
    tries += 1;
    throw new ConnectError("the caller cancelled", Code.Canceled);
  });
  await assert.rejects(own, (e: unknown) => e instanceof ConnectError && e.code === Code.Canceled);
  assert.equal(tries, 1);
});
