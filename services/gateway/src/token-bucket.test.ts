import assert from "node:assert/strict";
import { test } from "node:test";
import { TokenBucket } from "./token-bucket.ts";

test("a token bucket allows its burst, then paces at its rate and says how long to wait", () => {
  let now = 0;
  const bucket = new TokenBucket(2, 3, () => now);
  assert.equal(bucket.take(), 0);
  assert.equal(bucket.take(), 0);
  assert.equal(bucket.take(), 0);
  assert.equal(bucket.take(), 500); // one token comes back every 500 ms
  now = 499;
  assert.equal(bucket.take(), 1);
  now = 500;
  assert.equal(bucket.take(), 0);
  now = 10_000; // refills to the burst, not beyond
  for (let i = 0; i < 3; i++) assert.equal(bucket.take(), 0);
  assert.ok(bucket.take() > 0);
});

test("a take larger than the bucket passes when it is full and leaves a debt", () => {
  let now = 0;
  const bucket = new TokenBucket(100, 50, () => now);
  assert.equal(bucket.take(80), 0);
  // 30 tokens of debt + 1 needed = 310 ms at 100/s.
  assert.equal(bucket.take(1), 310);
  now = 800; // back to the full 50
  assert.equal(bucket.take(200), 0);
});
