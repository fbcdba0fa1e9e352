import assert from "node:assert/strict";
import { test } from "node:test";
import type { Delivery, IntakeHandler } from "../intake/intake.ts";
import { asking, TakeRoundTrip } from "./take-round-trip.ts";

test("the round trip is the lower quartile of the recent takes; only the first ask since an arrival counts", () => {
  let now = 0;
  const rtt = new TakeRoundTrip(() => now, 8);
  const take = (askAt: number, arriveAt: number): void => {
    now = askAt;
    rtt.asked();
    now = arriveAt;
    rtt.arrived();
  };
  take(0, 5);
  take(10, 16);
  take(20, 24);
  assert.equal(rtt.ms(), undefined, "not known before four takes");
  assert.equal(rtt.leadMs(), undefined);
  // An empty queue: the worker asks at 30, asks again (ignored), and the next job comes at 530.
  now = 30;
  rtt.asked();
  now = 100;
  rtt.asked();
  now = 530;
  rtt.arrived();
  // Samples 5, 6, 4, 500: the lower quartile (index floor(0.25 * 3) = 0 of the sorted) is 4.
  assert.equal(rtt.ms(), 4);
  assert.ok(Math.abs(rtt.leadMs()! - 4.4) < 1e-9, "the lead: a tenth more");
  // An arrival with no ask before it (a job already on its way) is no sample.
  now = 600;
  rtt.arrived();
  take(700, 707);
  take(800, 808);
  take(900, 909);
  take(1_000, 1_010);
  // Samples 5, 6, 4, 500, 7, 8, 9, 10: sorted 4, 5, 6, 7, 8, 9, 10, 500; floor(0.25 * 7) = 1: 5.
  assert.equal(rtt.ms(), 5);
  // The window keeps the latest 8: four more of 20 ms push out 5, 6, 4 and 500.
  for (let i = 0; i < 4; i++) take(2_000 + 100 * i, 2_020 + 100 * i);
  // 7, 8, 9, 10, 20, 20, 20, 20: index 1 is 8.
  assert.equal(rtt.ms(), 8);
});

test("the intake's handler tells an ask when it has room, and only then", () => {
  let room = 0;
  const delivered: Delivery[] = [];
  const inner: IntakeHandler = { deliver: (d) => void delivered.push(d), room: () => room };
  let now = 0;
  const rtt = new TakeRoundTrip(() => now, 8, 0.25, 1);
  const handler = asking(inner, rtt);
  assert.equal(handler.room(), 0);
  now = 10;
  rtt.arrived();
  assert.equal(rtt.ms(), undefined, "no room was offered: no ask, no sample");
  room = 2;
  assert.equal(handler.room(), 2);
  now = 17;
  rtt.arrived();
  assert.equal(rtt.ms(), 7, "asked at 10 ms, when it had room; arrived at 17");
  const d = { topic: "t", partition: 0, offset: "0", value: null, headers: undefined, deliveryCount: 1, settle: () => undefined } satisfies Delivery;
  handler.deliver(d);
  assert.deepEqual(delivered, [d], "deliveries pass through");
});
