import assert from "node:assert/strict";
import { test } from "node:test";
import { planCalls } from "./call-plan.ts";

test("small groups share a call while they fit the cap", () => {
  const tokens = [10, 10, 20, 20, 30];
  assert.deepEqual(planCalls([[0, 1], [2, 3], [4]], tokens, 80), [
    [
      [0, 1],
      [2, 3],
    ],
    [[4]],
  ]);
  assert.deepEqual(planCalls([[0, 1], [2, 3], [4]], tokens, 90), [[[0, 1], [2, 3], [4]]]);
});

test("a group over the cap is split into runs of items that fit; every item appears once, in order", () => {
  const tokens = Array.from({ length: 10 }, () => 100);
  const calls = planCalls([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], tokens, 256);
  assert.deepEqual(calls, [[[0, 1]], [[2, 3]], [[4, 5]], [[6, 7]], [[8, 9]]]);
  for (const call of calls) {
    const padded = call.reduce((n, g) => n + g.length * Math.max(...g.map((i) => tokens[i]!)), 0);
    assert.ok(padded <= 256);
  }
});

test("an item longer than the cap runs alone", () => {
  assert.deepEqual(planCalls([[0, 1]], [600, 600], 512), [[[0]], [[1]]]);
});

test("a cap at least the whole phase keeps one call", () => {
  const groups = [[0, 1], [2]];
  assert.deepEqual(planCalls(groups, [5, 5, 50], Number.POSITIVE_INFINITY), [groups]);
});
