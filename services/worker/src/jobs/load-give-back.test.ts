import assert from "node:assert/strict";
import { test } from "node:test";
import { loadGiveBack } from "./load-give-back.ts";

// A share group with SHOAL_SHARE_DELIVERY_LIMIT=5: the lifecycle dead-letters from delivery 4 (maxDeliveries).
const share = { releaseRedelivers: true, maxDeliveries: 4, retriable: true, draining: false };

test("on a share group, a job whose model cannot load here is declined while a later delivery may run it", () => {
  assert.equal(loadGiveBack({ ...share, deliveryCount: 1 }), "decline");
  assert.equal(loadGiveBack({ ...share, deliveryCount: 2 }), "decline");
});

test("on its last delivery that may run, it goes round the retry topic, and is failed only when its attempts are spent too", () => {
  assert.equal(loadGiveBack({ ...share, deliveryCount: 3 }), "retry");
  assert.equal(loadGiveBack({ ...share, deliveryCount: 3, retriable: false }), "fail");
  assert.equal(loadGiveBack({ ...share, deliveryCount: 3, draining: true }), "fail", "a draining worker answers rather than retries");
  assert.equal(loadGiveBack({ ...share, deliveryCount: 1, draining: true }), "decline", "but still gives a job back while deliveries remain");
});

test("a queue that does not redeliver at once (consumer group, routed records) answers at once", () => {
  assert.equal(loadGiveBack({ releaseRedelivers: false, maxDeliveries: undefined, retriable: true, draining: false, deliveryCount: 1 }), "fail");
});

test("without a delivery limit (the intake cannot count deliveries) a job is always declined", () => {
  assert.equal(loadGiveBack({ releaseRedelivers: true, maxDeliveries: undefined, retriable: true, draining: false, deliveryCount: 9 }), "decline");
});
