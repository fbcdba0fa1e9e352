import assert from "node:assert/strict";
import { test } from "node:test";
import { consumerBacklog, consumerNeed, partitionKey, shareBacklog, shareNeed, type Watermarks } from "./lag-math.ts";

const ends = new Map<string, Watermarks>([
  [partitionKey("i", 0), { high: 20n, low: 0n }],
  [partitionKey("i", 1), { high: 30n, low: 5n }],
  [partitionKey("batch", 0), { high: 50n, low: 10n }],
]);

test("share backlog: the broker's lag where it has one, high watermark − start offset (or low watermark) where not", () => {
  const parts = [
    { topic: "i", partition: 0, startOffset: 12n, lag: 3n }, // the broker's word
    { topic: "i", partition: 1, startOffset: 25n }, // no lag: 30 − 25
    { topic: "batch", partition: 0, startOffset: -1n }, // no state yet: 50 − 10
  ];
  assert.deepEqual(
    parts.map((p) => shareNeed(p)),
    ["none", "high", "both"],
  );
  assert.deepEqual(
    shareBacklog(["i", "batch"], parts, ends),
    new Map([
      ["i", 8],
      ["batch", 40],
    ]),
  );
});

test("share backlog needs no watermarks when every partition has a lag; a missing one is an error, not a zero", () => {
  assert.deepEqual(shareBacklog(["t"], [{ topic: "t", partition: 0, startOffset: 0n, lag: 0n }], new Map()), new Map([["t", 0]]));
  assert.throws(() => shareBacklog(["t"], [{ topic: "t", partition: 0, startOffset: 4n }], new Map()), /no watermarks read for t-0/);
  assert.throws(
    () => shareBacklog(["t"], [{ topic: "t", partition: 0, startOffset: -1n }], new Map([[partitionKey("t", 0), { high: 9n }]])),
    /no watermarks read for t-0/,
  );
});

test("consumer-group backlog: high watermark − commit, from the low watermark without one; never negative", () => {
  const committed = [
    { topic: "i", partition: 0, offset: 15n },
    { topic: "i", partition: 1, offset: -1n },
    { topic: "batch", partition: 0, offset: 60n }, // a commit past the end (topic re-created): 0, not −10
  ];
  assert.deepEqual(
    committed.map((c) => consumerNeed(c)),
    ["high", "both", "high"],
  );
  assert.deepEqual(
    consumerBacklog(["i", "batch", "quiet"], committed, ends),
    new Map([
      ["i", 5 + 25],
      ["batch", 0],
      ["quiet", 0],
    ]),
  );
});
