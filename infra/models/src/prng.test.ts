import assert from "node:assert/strict";
import { test } from "node:test";
import { fillNormal, mulberry32, tensorSeed } from "./prng.ts";

test("mulberry32 is deterministic and uniform in [0, 1)", () => {
  const a = mulberry32(123);
  const b = mulberry32(123);
  const xs = Array.from({ length: 10000 }, () => a());
  assert.deepEqual(
    xs.slice(0, 100),
    Array.from({ length: 100 }, () => b()),
  );
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.01, `mean ${mean}`);
  assert.notEqual(mulberry32(124)(), mulberry32(123)());
});

test("fillNormal has the requested std and a pinned first value", () => {
  const out = fillNormal(new Float32Array(200001), 0.02, 7);
  const mean = out.reduce((s, x) => s + x, 0) / out.length;
  const std = Math.sqrt(out.reduce((s, x) => s + (x - mean) ** 2, 0) / out.length);
  assert.ok(Math.abs(mean) < 2e-4, `mean ${mean}`);
  assert.ok(Math.abs(std - 0.02) < 2e-4, `std ${std}`);
  assert.ok(out.every(Number.isFinite));
  // Pin the stream: a change here changes every generated model (bump GENERATOR_VERSION).
  assert.deepEqual(
    Array.from(fillNormal(new Float32Array(3), 1, 7), (x) => x.toFixed(6)),
    ["0.141970", "0.058241", "-0.864253"],
  );
});

test("tensor seeds depend on the model seed and the tensor name", () => {
  assert.equal(tensorSeed(1, "a.weight"), tensorSeed(1, "a.weight"));
  assert.notEqual(tensorSeed(1, "a.weight"), tensorSeed(2, "a.weight"));
  assert.notEqual(tensorSeed(1, "a.weight"), tensorSeed(1, "b.weight"));
});
