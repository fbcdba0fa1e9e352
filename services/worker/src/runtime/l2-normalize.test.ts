import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { l2normalize } from "./l2-normalize.ts";

describe("l2normalize", () => {
  it("scales each row to unit length in place", () => {
    const v = new Float32Array([3, 4, 0, 0, 0, 5, -1, 1, 1]);
    l2normalize(v, 3);
    const expected = [0.6, 0.8, 0, 0, 0, 1, -1 / Math.sqrt(3), 1 / Math.sqrt(3), 1 / Math.sqrt(3)];
    for (let i = 0; i < v.length; i++) assert.ok(Math.abs(v[i]! - expected[i]!) < 1e-7, `v[${i}] = ${v[i]}`);
  });

  it("leaves a zero row zero (no NaN)", () => {
    const v = new Float32Array([0, 0, 0, 0, 2, 0]);
    l2normalize(v, 3);
    assert.deepEqual([...v], [0, 0, 0, 0, 1, 0]);
  });

  it("norm is 1 within 1e-6 for 384-dim rows of wide-ranging magnitude", () => {
    const dims = 384;
    const v = new Float32Array(dims * 4);
    for (let i = 0; i < v.length; i++) v[i] = Math.sin(i * 12.9898) * 10 ** ((i % 4) - 2);
    l2normalize(v, dims);
    for (let r = 0; r < 4; r++) {
      let s = 0;
      for (let d = 0; d < dims; d++) s += v[r * dims + d]! ** 2;
      assert.ok(Math.abs(Math.sqrt(s) - 1) < 1e-6, `row ${r}: ${Math.sqrt(s)}`);
    }
  });

  it("rejects a length that is not a multiple of dims", () => {
    assert.throws(() => l2normalize(new Float32Array(5), 2), RangeError);
  });
});
