import assert from "node:assert/strict";
import { test } from "node:test";
import { callUnits, RunForecast } from "./run-forecast.ts";

test("the forecast learns ms per token-equivalent from ended calls and predicts the first call in progress to end", () => {
  let now = 1_000;
  const f = new RunForecast(() => now);
  assert.equal(f.msUntilFree(), undefined, "nothing running");
  assert.equal(f.msToDrain(1_000), undefined, "nothing learned: no forecast");
  const first = f.begin(1_000);
  assert.equal(f.msUntilFree(), undefined, "running, but nothing learned yet: no prediction");
  now += 20;
  first();
  first(); // ending twice counts once
  // Learned 0.02 ms per unit: a call of 2,000 units is predicted to take 40 ms.
  const a = f.begin(2_000);
  now += 10;
  assert.equal(f.msUntilFree(), 30);
  const b = f.begin(500); // 10 ms: ends before a
  assert.equal(f.msUntilFree(), 10);
  now += 15;
  assert.equal(f.msUntilFree(), 0, "b is overdue: free any moment now");
  b(); // took 15 ms for 500 units (0.03): the estimate moves a fifth of the way, to 0.022
  assert.equal(f.msUntilFree(), 15, "a keeps the prediction it was given at its start (1,020 + 40)");
  a(); // 25 ms for 2,000 units (0.0125): 0.8 × 0.022 + 0.2 × 0.0125 = 0.0201
  assert.equal(f.msUntilFree(), undefined);
  assert.ok(Math.abs(f.msToDrain(1_000)! - 20.1) < 1e-9, "nothing running: the waiting work alone");
  assert.equal(f.msToDrain(0), undefined, "nothing running, nothing waiting");
  const c = f.begin(1_000);
  assert.ok(Math.abs(f.msUntilFree()! - 20.1) < 1e-9, `learned 0.0201 ms per unit: ${f.msUntilFree()}`);
  now += 10;
  assert.ok(Math.abs(f.msToDrain(500)! - (10.1 + 10.05)) < 1e-9, "the call's 10.1 ms left, then 500 units more");
  c();
});

test("a call's cost: each padded group is rows × its longest row plus one call's overhead", () => {
  assert.equal(callUnits([[10, 30, 20]], 0), 90);
  assert.equal(callUnits([[10, 30], [5]], 100), 60 + 100 + 5 + 100);
  assert.equal(callUnits([], 100), 0);
});
