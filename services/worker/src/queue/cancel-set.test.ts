import assert from "node:assert/strict";
import { test } from "node:test";
import { CancelSet } from "./cancel-set.ts";

test("remembers a cancel until the job's deadline, then forgets it", () => {
  let now = 1_000;
  const set = new CancelSet(10, 60_000, () => now);
  set.add("a", 1_500);
  assert.equal(set.has("a"), true);
  now = 1_501;
  assert.equal(set.has("a"), false);
  assert.equal(set.size, 0);
});

test("a cancel without a future deadline lives for the ttl", () => {
  let now = 0;
  const set = new CancelSet(10, 100, () => now);
  set.add("b", 0);
  now = 99;
  assert.equal(set.has("b"), true);
  now = 101;
  assert.equal(set.has("b"), false);
});

test("bounded: past capacity the oldest cancels are forgotten", () => {
  const set = new CancelSet(3, 60_000, () => 0);
  for (const id of ["a", "b", "c", "d"]) set.add(id, 10_000);
  assert.equal(set.size, 3);
  assert.equal(set.has("a"), false);
  assert.equal(set.has("d"), true);
});

test("a far-future deadline (forged or absurd) still expires after the cap", () => {
  let now = 0;
  const set = new CancelSet(10, 100, () => now, 1_000);
  set.add("f", 2 ** 52);
  now = 999;
  assert.equal(set.has("f"), true);
  now = 1_001;
  assert.equal(set.has("f"), false);
});
