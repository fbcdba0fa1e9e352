import assert from "node:assert/strict";
import { test } from "node:test";
import RequestQueue from "kafkajs/src/network/requestQueue/index.js";
import { stopKafkajsIdleLoop } from "./kafkajs-idle-loop.ts";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const queue = (): InstanceType<typeof RequestQueue> =>
  new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 30_000, enforceRequestTimeout: false, clientId: "t", broker: "127.0.0.1:1", logger: quiet });

/** How many times `checkPendingRequests` runs in `ms` after one call, nothing pending, no throttle. */
async function checksIn(q: InstanceType<typeof RequestQueue>, ms: number): Promise<number> {
  let n = 0;
  const check = q.checkPendingRequests.bind(q);
  q.checkPendingRequests = () => {
    n += 1;
    check();
  };
  q.checkPendingRequests();
  await new Promise((r) => setTimeout(r, ms));
  q.destroy();
  return n;
}

test("kafkajs as shipped: an idle request queue checks itself in a ~1 ms loop", async () => {
  const n = await checksIn(queue(), 100);
  assert.ok(n > 20, `unpatched kafkajs ran checkPendingRequests ${n} times in 100 ms with nothing pending`);
});

test("patched: an idle queue schedules nothing; a pending request or a throttle still gets its check", async () => {
  stopKafkajsIdleLoop();
  stopKafkajsIdleLoop();
  const idle = queue();
  assert.equal(await checksIn(idle, 100), 1, "one call, no loop");
  assert.equal(idle.throttleCheckTimeoutId, null);

  const pending = queue();
  pending.pending.push({});
  pending.scheduleCheckPendingRequests();
  assert.notEqual(pending.throttleCheckTimeoutId, null, "a pending request keeps its check");
  pending.destroy();

  const throttled = queue();
  throttled.throttledUntil = Date.now() + 50;
  throttled.scheduleCheckPendingRequests();
  assert.notEqual(throttled.throttleCheckTimeoutId, null, "a throttle in force keeps its check");
  throttled.destroy();
});
