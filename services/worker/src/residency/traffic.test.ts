import assert from "node:assert/strict";
import { test } from "node:test";
import { DecayingCount } from "./traffic.ts";

test("DecayingCount halves every half-life and adds requests on top", () => {
  const d = new DecayingCount(1_000);
  assert.equal(d.valueAt(0), 0);
  d.add(0);
  d.add(0);
  d.add(0);
  d.add(0);
  assert.equal(d.valueAt(0), 4);
  assert.equal(d.valueAt(1_000), 2);
  assert.equal(d.valueAt(3_000), 0.5);
  d.add(1_000);
  assert.equal(d.valueAt(1_000), 3);
  assert.equal(d.valueAt(2_000), 1.5);
});

test("DecayingCount settles near rate × half-life / ln 2 under steady traffic", () => {
  const d = new DecayingCount(10_000);
  for (let t = 0; t <= 200_000; t += 100) d.add(t); // 0.01 requests/ms
  const expected = (0.01 * 10_000) / Math.LN2;
  assert.ok(Math.abs(d.valueAt(200_000) - expected) / expected < 0.01, `${d.valueAt(200_000)} vs ${expected}`);
});

test("DecayingCount ignores a clock going backwards and rejects a bad half-life", () => {
  const d = new DecayingCount(1_000);
  d.add(5_000);
  assert.equal(d.valueAt(4_000), 1);
  assert.throws(() => new DecayingCount(0), RangeError);
});
