import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { activationOf, applyActivation, sigmoid, softmax } from "./activations.ts";

function close(actual: ArrayLike<number>, expected: readonly number[], tol = 1e-6): void {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i]! - expected[i]!) <= tol, `[${i}] ${actual[i]} vs ${expected[i]}`);
  }
}

/** Only the fields the activations read; the rest does not matter here. */
function spec(fields: Record<string, unknown>): ModelSpec {
  return fields as unknown as ModelSpec;
}

describe("sigmoid", () => {
  it("maps each logit into (0, 1) in place, symmetric about 0", () => {
    const v = new Float32Array([0, 2, -2, 1e-3]);
    assert.equal(sigmoid(v), v);
    close(v, [0.5, 1 / (1 + Math.exp(-2)), 1 / (1 + Math.exp(2)), 0.50025]);
  });

  it("does not overflow for large |x|", () => {
    const v = sigmoid(new Float32Array([1000, -1000, 88, -88, -Infinity, Infinity]));
    assert.deepEqual([...v], [1, 0, 1, Math.fround(Math.exp(-88) / (1 + Math.exp(-88))), 0, 1]);
    assert.ok(v[3]! > 0, "a very negative logit keeps a positive score");
  });
});

describe("softmax", () => {
  it("normalises each row separately, in place", () => {
    const v = new Float32Array([1, 2, 3, 0, 0, 0]);
    assert.equal(softmax(v, 3), v);
    const e = [Math.exp(1), Math.exp(2), Math.exp(3)];
    const s = e[0]! + e[1]! + e[2]!;
    close(v, [e[0]! / s, e[1]! / s, e[2]! / s, 1 / 3, 1 / 3, 1 / 3]);
  });

  it("is stable for large logits (shift invariant, no overflow)", () => {
    const big = softmax(new Float32Array([1000, 1001, 1002]), 3);
    const small = softmax(new Float32Array([0, 1, 2]), 3);
    close(big, [...small]);
    close(softmax(new Float32Array([-1000, 0]), 2), [0, 1]);
  });

  it("takes limits for infinite logits", () => {
    close(softmax(new Float32Array([Infinity, 1, Infinity, -Infinity]), 4), [0.5, 0, 0.5, 0]);
    close(softmax(new Float32Array([-Infinity, -Infinity]), 2), [0.5, 0.5]);
    close(softmax(new Float32Array([-Infinity, 3]), 2), [0, 1]);
  });

  it("rejects a length that is not whole rows", () => {
    assert.throws(() => softmax(new Float32Array(5), 2), RangeError);
    assert.throws(() => softmax(new Float32Array(4), 0), RangeError);
  });
});

describe("activationOf / applyActivation", () => {
  const rerank = spec({ task: "rerank", dimensions: 1, scoreActivation: "sigmoid" });
  const rawRerank = spec({ task: "rerank", dimensions: 1, scoreActivation: "none" });
  const single = spec({ task: "classify", dimensions: 2, problemType: "single_label" });
  const multi = spec({ task: "classify", dimensions: 2, problemType: "multi_label" });
  const embed = spec({ task: "embed", dimensions: 2 });

  it("picks the activation from the spec", () => {
    assert.deepEqual([rerank, rawRerank, single, multi, embed].map(activationOf), ["sigmoid", "none", "softmax", "sigmoid", "none"]);
  });

  it("applies it in place to rows of spec.dimensions", () => {
    close(applyActivation(rerank, new Float32Array([0, 2])), [0.5, 1 / (1 + Math.exp(-2))]);
    close(applyActivation(rawRerank, new Float32Array([-3, 2])), [-3, 2]);
    close(applyActivation(single, new Float32Array([0, 0, 5, 5])), [0.5, 0.5, 0.5, 0.5]);
    close(applyActivation(multi, new Float32Array([0, 0, 5, 5])), [0.5, 0.5, 1 / (1 + Math.exp(-5)), 1 / (1 + Math.exp(-5))]);
    close(applyActivation(embed, new Float32Array([3, 4])), [3, 4]);
    assert.throws(() => applyActivation(single, new Float32Array(3)), RangeError);
  });
});
