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
  assert.equal(estimateTokens(["a".repeat(3_000)], 128, false), 129, "over the limit fails without compute: priced at one token more");
});

test("fair share: one greedy caller cannot get a small caller refused; the greedy one is refused first", () => {
  // The #19 scenario at the default limit (200,000 interactive tokens): four Embed calls of 256
  // texts of 32K characters (truncate, a 512-token model: 131,072 tokens each) from one tenant,
  // then small calls (2 texts of 200 characters: 138 tokens) from another.
  const a = new Admission({ interactive: { maxInFlightTokens: 200_000, maxQueuedTokens: 1_000_000 }, batch: limits.batch }, () => 0);
  const huge = estimateTokens(Array(256).fill("x".repeat(32_768)), 512, true);
  assert.equal(huge, 131_072);
  const small = estimateTokens(["y".repeat(200), "z".repeat(200)], 512, true);
  assert.equal(small, 138);
  const greedy = [1, 2, 3, 4].map(() => a.tryAdmit("interactive", huge, "greedy"));
  assert.equal(greedy.filter((t) => t.ok).length, 1, "the first runs (lane empty), the rest exceed the limit");
  const refusedGreedy = greedy[1]!;
  assert.ok(!refusedGreedy.ok && refusedGreedy.reason === "in-flight");
  // Fair share with two callers: 100,000 each. The small caller is admitted 100 times over.
  const tickets = Array.from({ length: 100 }, () => a.tryAdmit("interactive", small, "small"));
  assert.ok(
    tickets.every((t) => t.ok),
    "every small call admitted although the lane is full",
  );
  assert.equal(a.callerTokens("interactive", "small"), 13_800);
  // The greedy caller, over its share, is refused with the reason named.
  const again = a.tryAdmit("interactive", huge, "greedy");
  assert.ok(!again.ok && again.reason === "fair-share" && /fair share of 100000/.test(again.message), JSON.stringify(again));
  // A third caller gets a third of the lane: 66,666 tokens.
  assert.ok(a.tryAdmit("interactive", 60_000, "third").ok);
  const thirdOver = a.tryAdmit("interactive", 10_000, "third");
  assert.ok(!thirdOver.ok && thirdOver.reason === "fair-share");
  // Released tickets leave no trace of their caller.
  for (const t of tickets) if (t.ok) t.release();
  assert.equal(a.callerTokens("interactive", "small"), 0);
});
