import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { biEncoderScores, cosineAt, zeroShotScores } from "./composite-scoring.ts";

const close = (a: number, b: number, eps = 1e-6): void => assert.ok(Math.abs(a - b) < eps, `${a} vs ${b}`);

describe("composite scoring", () => {
  test("cosine ignores length, is 1 for the same direction, -1 for the opposite, 0 for orthogonal or zero rows", () => {
    const rows = new Float32Array([3, 4, 0.6, 0.8, -3, -4, 4, -3, 0, 0]);
    close(cosineAt(rows, 2, 0, 1), 1);
    close(cosineAt(rows, 2, 0, 2), -1);
    close(cosineAt(rows, 2, 0, 3), 0);
    assert.equal(cosineAt(rows, 2, 0, 4), 0);
  });

  test("bi-encoder: the query is row 0; each document scores cosine(query, document) in [-1, 1], no sigmoid", () => {
    // query (1, 0); documents at 0°, 60°, 180° and unnormalised (2, 2) at 45°.
    const rows = new Float32Array([1, 0, 5, 0, 0.5, Math.sqrt(3) / 2, -1, 0, 2, 2]);
    const s = biEncoderScores(rows, 2);
    assert.equal(s.length, 4);
    close(s[0]!, 1);
    close(s[1]!, 0.5);
    close(s[2]!, -1);
    close(s[3]!, Math.SQRT1_2);
  });

  test("zero-shot: softmax over cosine / temperature, rows sum to 1, the closest label wins", () => {
    const texts = new Float32Array([1, 0, 0, 1]);
    const labels = new Float32Array([1, 0, 0.6, 0.8, 0, 2]);
    const t = 0.05;
    const s = zeroShotScores(texts, labels, 2, t);
    assert.equal(s.length, 6);
    // By hand for text 0: cosines 1, 0.6, 0.
    const e = [1, 0.6, 0].map((c) => Math.exp(c / t));
    const sum = e.reduce((a, b) => a + b, 0);
    for (let l = 0; l < 3; l++) close(s[l]!, e[l]! / sum);
    close(s[0]! + s[1]! + s[2]!, 1);
    close(s[3]! + s[4]! + s[5]!, 1);
    assert.ok(s[5]! > s[4]! && s[4]! > s[3]!, "text 1 points at label 2");
  });

  test("zero-shot: a higher temperature flattens the scores, the order stays", () => {
    const texts = new Float32Array([1, 0]);
    const labels = new Float32Array([1, 0, 0.6, 0.8]);
    const sharp = zeroShotScores(texts, labels, 2, 0.05);
    const flat = zeroShotScores(texts, labels, 2, 1);
    assert.ok(sharp[0]! > 0.99);
    assert.ok(flat[0]! > flat[1]! && flat[0]! < 0.7);
    assert.throws(() => zeroShotScores(texts, labels, 2, 0), RangeError);
  });
});
