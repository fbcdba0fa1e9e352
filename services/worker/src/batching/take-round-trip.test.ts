import assert from "node:assert/strict";
import { test } from "node:test";
import { TakeRoundTrip } from "./take-round-trip.ts";

test("the take round trip is the lower quartile of the recent fetches that brought records, plus a simulated network", () => {
  const rtt = new TakeRoundTrip(0, 8);
  for (const ms of [5, 6, 4]) rtt.fetched(ms);
  assert.equal(rtt.ms(), undefined, "not known before four fetches");
  assert.equal(rtt.leadMs(), undefined);
  // A fetch that waited 500 ms at the broker for a job to arrive (the queue was empty).
  rtt.fetched(500);
  // Samples 5, 6, 4, 500: the lower quartile (index floor(0.25 * 3) = 0 of the sorted) is 4.
  assert.equal(rtt.ms(), 4);
  assert.ok(Math.abs(rtt.leadMs()! - 4.4) < 1e-9, "the lead: a tenth more");
  rtt.fetched(Number.NaN);
  rtt.fetched(-1);
  for (const ms of [7, 8, 9, 10]) rtt.fetched(ms);
  // Sorted 4, 5, 6, 7, 8, 9, 10, 500 (NaN and negative ignored): floor(0.25 * 7) = 1, so 5.
  assert.equal(rtt.ms(), 5);
  // The window keeps the latest 8: four of 20 ms push out 5, 6, 4 and 500.
  for (let i = 0; i < 4; i++) rtt.fetched(20);
  // 7, 8, 9, 10, 20, 20, 20, 20: index 1 is 8.
  assert.equal(rtt.ms(), 8);
  const simulated = new TakeRoundTrip(120, 8);
  for (const ms of [3, 4, 5, 6]) simulated.fetched(ms);
  assert.equal(simulated.ms(), 123, "a simulated 120 ms network after each fetch is part of each take");
  assert.equal(simulated.covers(123), true, "free within the round trip: a give-back would not be sooner");
  assert.equal(simulated.covers(124), false);
  assert.equal(simulated.covers(undefined), false, "not known: no claim");
  assert.equal(new TakeRoundTrip().covers(0), false, "round trip not measured yet");
});
