import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { LoadBackoff } from "./load-backoff.ts";

describe("load backoff", () => {
  test("waits 1 s after a failed load, doubling per failure in a row up to 30 s", () => {
    let now = 0;
    const b = new LoadBackoff({ now: () => now });
    const corrupted = new Error("Protobuf parsing failed");
    assert.equal(b.failure("m"), undefined, "a model never failed is not backing off");
    const waits = Array.from({ length: 8 }, () => b.failed("m", corrupted));
    assert.deepEqual(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    assert.deepEqual(b.failure("m"), { model: "m", error: corrupted, failures: 8, retryInMs: 30_000 });
    now = 29_999;
    assert.equal(b.failure("m")?.retryInMs, 1);
    now = 45_000;
    assert.equal(b.failure("m")?.retryInMs, 0, "due: the next job or acquire tries the load again");
    assert.equal(b.failure("m")?.failures, 8, "still failing until a load succeeds");
  });

  test("a load that succeeds forgets the failures: the next failure waits 1 s again", () => {
    let now = 0;
    const b = new LoadBackoff({ now: () => now });
    b.failed("m", new Error("a"));
    b.failed("m", new Error("b"));
    b.failed("other", new Error("c"));
    now = 10_000;
    b.succeeded("m");
    assert.equal(b.failure("m"), undefined);
    assert.deepEqual(
      b.failures().map((f) => f.model),
      ["other"],
      "each model keeps its own backoff",
    );
    assert.equal(b.failed("m", new Error("d")), 1_000);
    assert.equal(b.failure("m")?.retryInMs, 1_000);
  });

  test("custom bounds: 250 ms doubling to at most 1 s", () => {
    const b = new LoadBackoff({ initialMs: 250, maxMs: 1_000, now: () => 0 });
    assert.deepEqual(
      Array.from({ length: 4 }, () => b.failed("m", new Error("x"))),
      [250, 500, 1_000, 1_000],
    );
  });
});
