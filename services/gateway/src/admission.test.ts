import assert from "node:assert/strict";
import { test } from "node:test";
import { Admission, estimateTokens } from "./admission.ts";

const limits = {
  interactive: { maxInFlightTokens: 100, maxQueuedTokens: 1_000 },
  batch: { maxInFlightTokens: 500, maxQueuedTokens: 5_000 },
};

test("in-flight tokens are counted per lane and released once", () => {
  const a = new Admission(limits, () => 0);
  const first = a.tryAdmit("interactive", 60);
  assert.ok(first.ok);
  const second = a.tryAdmit("interactive", 50);
  assert.equal(second.ok, false, "60 + 50 > 100");
  assert.ok(!second.ok && second.reason === "in-flight" && /110 in-flight tokens would exceed the limit of 100/.test(second.message));
  assert.ok(a.tryAdmit("batch", 400).ok, "the other lane has its own budget");
  first.release();
  first.release();
  assert.equal(a.inFlightTokens("interactive"), 0, "double release counts once");
  assert.ok(a.tryAdmit("interactive", 50).ok);
});

test("one call larger than the limit runs when its lane is empty (it could never run otherwise)", () => {
  const a = new Admission(limits, () => 0);
  const big = a.tryAdmit("interactive", 250);
  assert.ok(big.ok);
  assert.equal(a.tryAdmit("interactive", 1).ok, false);
});

test("queued tokens (consumer lag) refuse new calls; the retry hint follows observed throughput", () => {
  let now = 0;
  const a = new Admission(limits, () => now);
  // Observe 2,000 tokens/s: 20 calls of 100 tokens over one second.
  for (let i = 0; i < 20; i++) {
    const t = a.tryAdmit("batch", 100);
    assert.ok(t.ok);
    now += 50;
    t.release();
  }
  a.setQueued("batch", 6_000);
  const refused = a.tryAdmit("batch", 100);
  assert.ok(!refused.ok);
  assert.equal(refused.reason, "queued");
  // Excess 6,000 + 100 - 5,000 = 1,100 tokens at 2,000 tokens/s = 550 ms.
  assert.equal(refused.retryAfterMs, 550);
  a.setQueued("batch", 100);
  assert.ok(a.tryAdmit("batch", 100).ok);
});

test("retry hints stay within 50 ms .. 30 s", () => {
  const a = new Admission(limits, () => 0);
  a.setQueued("interactive", 10_000_000);
  const r = a.tryAdmit("interactive", 1);
  assert.ok(!r.ok && r.retryAfterMs === 30_000);
});

test("token estimate: chars/3 + specials, capped by the model limit when truncating", () => {
  assert.equal(estimateTokens(["abcdef", "x"], 128, false), 4 + 3);
  assert.equal(estimateTokens(["a".repeat(3_000)], 128, true), 128);
  assert.equal(estimateTokens(["a".repeat(3_000)], 128, false), 1_002);
});
