import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FlightCache } from "./flight-cache.ts";

/** A cache of strings whose entries weigh their value's length plus their key's, with every event counted. */
function cache(maxBytes: number) {
  const counts = { hit: 0, miss: 0, join: 0, evict: 0 };
  const c = new FlightCache<string>({
    maxBytes,
    sizeOf: (key, value) => key.length + value.length,
    events: {
      hit: () => counts.hit++,
      miss: () => counts.miss++,
      join: () => counts.join++,
      evict: () => counts.evict++,
    },
  });
  return { c, counts };
}

/** Owns `key` (asserting it was a miss) and settles it with `value`. */
function put(c: FlightCache<string>, key: string, value: string): void {
  const found = c.lookup(key);
  assert.equal(found.kind, "own");
  if (found.kind === "own") found.flight.settle(value);
}

describe("FlightCache", () => {
  test("a settled key is a hit; an unknown one a miss that the caller owns", () => {
    const { c, counts } = cache(1_000);
    put(c, "k1", "v1");
    const again = c.lookup("k1");
    assert.deepEqual(again, { kind: "hit", value: "v1" });
    assert.equal(c.lookup("k2").kind, "own");
    assert.deepEqual(counts, { hit: 1, miss: 2, join: 0, evict: 0 });
    assert.equal(c.bytes, 4);
    assert.equal(c.entries, 1);
  });

  test("evicts the least recently used entries by bytes, never holding more than maxBytes", () => {
    const { c, counts } = cache(30);
    put(c, "a", "x".repeat(9)); // 10 bytes
    put(c, "b", "x".repeat(9)); // 20
    put(c, "c", "x".repeat(9)); // 30: full
    assert.equal(c.lookup("a").kind, "hit"); // a is now the most recent: b is next out
    put(c, "d", "x".repeat(14)); // 15 bytes: b and c go
    assert.equal(counts.evict, 2);
    assert.equal(c.bytes, 25);
    assert.equal(c.lookup("a").kind, "hit");
    assert.equal(c.lookup("d").kind, "hit");
    assert.equal(c.lookup("b").kind, "own");
    assert.ok(c.bytes <= 30);
  });

  test("an entry larger than the whole cache is handed to its waiters but not stored", async () => {
    const { c } = cache(10);
    const owner = c.lookup("big");
    const waiter = c.lookup("big");
    assert.ok(owner.kind === "own" && waiter.kind === "join");
    owner.flight.settle("y".repeat(50));
    assert.equal(await waiter.result, "y".repeat(50));
    assert.equal(c.entries, 0);
    assert.equal(c.bytes, 0);
  });

  test("a key in flight is joined: the waiters get the owner's value, and later lookups hit", async () => {
    const { c, counts } = cache(1_000);
    const owner = c.lookup("k");
    const w1 = c.lookup("k");
    const w2 = c.lookup("k");
    assert.ok(owner.kind === "own" && w1.kind === "join" && w2.kind === "join");
    assert.equal(c.inFlight, 1);
    setTimeout(() => owner.flight.settle("v"), 5);
    assert.deepEqual(await Promise.all([w1.result, w2.result]), ["v", "v"]);
    assert.equal(c.inFlight, 0);
    assert.deepEqual(c.lookup("k"), { kind: "hit", value: "v" });
    assert.deepEqual(counts, { hit: 1, miss: 1, join: 2, evict: 0 });
  });

  test("an abandoned flight answers its waiters undefined (look again), stores nothing, and the next lookup owns the key", async () => {
    const { c } = cache(1_000);
    const owner = c.lookup("k");
    const waiter = c.lookup("k");
    assert.ok(owner.kind === "own" && waiter.kind === "join");
    owner.flight.abandon();
    assert.equal(await waiter.result, undefined);
    const next = c.lookup("k");
    assert.equal(next.kind, "own");
    // A late settle of the abandoned flight changes nothing.
    owner.flight.settle("late");
    assert.equal(c.entries, 0);
    assert.equal(c.inFlight, 1);
  });

  test("flights of another group are not joined, but their stored value serves every group", async () => {
    const { c } = cache(1_000);
    const batch = c.lookup("k", "batch");
    const interactive = c.lookup("k", "interactive");
    assert.ok(batch.kind === "own" && interactive.kind === "own");
    batch.flight.settle("from-batch");
    assert.deepEqual(c.lookup("k", "interactive"), { kind: "hit", value: "from-batch" });
    interactive.flight.settle("from-interactive");
    assert.deepEqual(c.lookup("k", "batch"), { kind: "hit", value: "from-interactive" });
    assert.equal(c.inFlight, 0);
  });

  test("maxBytes below 1 is refused", () => {
    assert.throws(() => new FlightCache<string>({ maxBytes: 0, sizeOf: () => 1 }), RangeError);
  });
});
