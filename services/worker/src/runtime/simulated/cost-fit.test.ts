import assert from "node:assert/strict";
import { test } from "node:test";
import { fitCallCost, type CostPoint } from "./cost-fit.ts";

const grid = (f: (b: number, l: number) => number): CostPoint[] =>
  [1, 2, 4, 8, 16, 32].flatMap((batch) => [16, 32, 64, 128, 256].map((seqLen) => ({ batch, seqLen, ms: f(batch, seqLen) })));

test("recovers exact coefficients from noiseless points", () => {
  const fit = fitCallCost(grid((b, l) => 2 + 0.08 * b * l + 0.0001 * b * l * l));
  assert.ok(Math.abs(fit.aMs - 2) < 1e-6);
  assert.ok(Math.abs(fit.bMsPerToken - 0.08) < 1e-9);
  assert.ok(Math.abs(fit.cMsPerToken2 - 0.0001) < 1e-12);
  assert.ok(fit.r2 > 0.999999);
  assert.ok(fit.maxRelativeError < 1e-6);
});

test("never returns a negative coefficient: a convex curve is fitted with c >= 0 and the rest free", () => {
  // Sub-linear in L: the unconstrained fit would want c < 0.
  const fit = fitCallCost(grid((b, l) => 1 + 0.05 * b * l - 0.00005 * b * l * l));
  assert.equal(fit.cMsPerToken2, 0);
  assert.ok(fit.aMs >= 0 && fit.bMsPerToken > 0);
  assert.ok(fit.r2 > 0.9);
});

test("refuses empty input and non-positive timings", () => {
  assert.throws(() => fitCallCost([]), /no points/);
  assert.throws(() => fitCallCost([{ batch: 1, seqLen: 16, ms: 0 }]), /bad point/);
});
