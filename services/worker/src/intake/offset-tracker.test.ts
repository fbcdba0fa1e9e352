import assert from "node:assert/strict";
import { test } from "node:test";
import { OffsetTracker } from "./offset-tracker.ts";

test("commits only up to the first record whose result is not produced yet", () => {
  const t = new OffsetTracker();
  for (const o of [10, 11, 12, 13]) t.begin(o);
  t.complete(12);
  assert.equal(t.takeCommittable(), undefined, "12 done but 10 and 11 are not");
  t.complete(10);
  assert.equal(t.takeCommittable(), 11, "commit = next offset to read");
  assert.equal(t.takeCommittable(), undefined, "nothing new since");
  t.complete(11);
  assert.equal(t.takeCommittable(), 13);
  assert.equal(t.inFlight, 1);
  t.complete(13);
  assert.equal(t.takeCommittable(), 14);
  assert.equal(t.inFlight, 0);
});

test("handles offset gaps (compaction, transaction markers) and long runs", () => {
  const t = new OffsetTracker();
  const offsets = Array.from({ length: 5000 }, (_, i) => i * 3);
  for (const o of offsets) t.begin(o);
  for (const o of [...offsets].reverse()) t.complete(o);
  assert.equal(t.takeCommittable(), offsets.at(-1)! + 1);
  assert.equal(t.inFlight, 0);
});
