import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chooseVictims, isResidencyPolicy, victimOrder, type VictimCandidate } from "./eviction-policy.ts";

const c = (model: string, bytes: number, lastUse: number, traffic = 0, hot = false): VictimCandidate => ({ model, bytes, lastUse, traffic, hot });
const names = (v: readonly VictimCandidate[] | undefined): string[] | undefined => v?.map((x) => x.model);

describe("eviction policy", () => {
  test("lru orders by recency only", () => {
    assert.deepEqual(names(victimOrder("lru", [c("a", 1, 3, 0), c("b", 1, 1, 99, true), c("c", 1, 2, 5)])), ["b", "c", "a"]);
  });

  test("pinned-by-traffic orders non-hot before hot, then by count, then by recency", () => {
    const order = victimOrder("pinned-by-traffic", [
      c("hot-low", 1, 0, 10, true),
      c("hot-high", 1, 1, 50, true),
      c("warm", 1, 2, 4),
      c("cold-new", 1, 9, 1),
      c("cold-old", 1, 3, 1),
    ]);
    assert.deepEqual(names(order), ["cold-old", "cold-new", "warm", "hot-low", "hot-high"]);
  });

  test("chooseVictims takes just enough, in order", () => {
    const cands = [c("a", 10, 1), c("b", 10, 2), c("c", 10, 3)];
    assert.deepEqual(names(chooseVictims("lru", cands, 0)), []);
    assert.deepEqual(names(chooseVictims("lru", cands, 5)), ["a"]);
    assert.deepEqual(names(chooseVictims("lru", cands, 15)), ["a", "b"]);
    assert.deepEqual(names(chooseVictims("lru", cands, 30)), ["a", "b", "c"]);
  });

  test("chooseVictims returns undefined (evict nothing) when all together cannot free enough", () => {
    assert.equal(chooseVictims("lru", [c("a", 10, 1), c("b", 10, 2)], 21), undefined);
    assert.equal(chooseVictims("lru", [], 1), undefined);
  });

  test("chooseVictims gives back victims made unnecessary by a later, bigger one", () => {
    assert.deepEqual(names(chooseVictims("lru", [c("small", 2, 1), c("big", 10, 2)], 10)), ["big"]);
    // Hot goes only because the non-hot ones cannot free the room, and then the non-hot ones stay.
    const cands = [c("cold1", 2, 1, 0), c("cold2", 2, 2, 0), c("hot", 10, 0, 99, true)];
    assert.deepEqual(names(chooseVictims("pinned-by-traffic", cands, 4)), ["cold1", "cold2"]);
    assert.deepEqual(names(chooseVictims("pinned-by-traffic", cands, 5)), ["hot"]);
  });

  test("isResidencyPolicy", () => {
    assert.equal(isResidencyPolicy("lru"), true);
    assert.equal(isResidencyPolicy("pinned-by-traffic"), true);
    assert.equal(isResidencyPolicy("lfu"), false);
  });
});
