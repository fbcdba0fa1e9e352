import assert from "node:assert/strict";
import { test } from "node:test";
import { delayedHandler } from "./delayed-handler.ts";
import type { Delivery, IntakeHandler } from "./intake.ts";

const record = (offset: string): Delivery => ({
  topic: "shoal.jobs.default.interactive",
  partition: 0,
  offset,
  value: Buffer.from("job"),
  headers: undefined,
  deliveryCount: 1,
  settle: () => undefined,
});

test("a simulated network: records reach the handler after the delay, and count against the room while they travel", async () => {
  const got: Array<{ offset: string; atMs: number }> = [];
  const inner: IntakeHandler = {
    deliver: (d) => void got.push({ offset: d.offset, atMs: performance.now() }),
    room: () => 4 - got.length,
    holds: (model) => model === "m",
  };
  const h = delayedHandler(inner, 40);
  const t0 = performance.now();
  h.deliver(record("1"));
  h.deliver(record("2"));
  assert.equal(got.length, 0, "nothing arrives at once");
  assert.equal(h.room(), 2, "4 free, 2 on their way");
  assert.equal(h.holds?.("m"), true);
  await new Promise((r) => setTimeout(r, 80));
  assert.deepEqual(
    got.map((g) => g.offset),
    ["1", "2"],
  );
  assert.ok(got[0]!.atMs - t0 >= 39, `arrived after ${(got[0]!.atMs - t0).toFixed(1)} ms`);
  assert.equal(h.room(), 2, "arrived: the handler holds them now");
});
