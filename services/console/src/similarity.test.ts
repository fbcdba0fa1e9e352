import assert from "node:assert/strict";
import { test } from "node:test";
import { formatMs, LatencyWindow } from "./latency.ts";
import { colorFloor, cosineMatrix, similarityColor } from "./similarity.ts";

test("cosine matrix: symmetric, 1 on the diagonal, -1 for opposite vectors, 0 for a zero vector", () => {
  const m = cosineMatrix([
    [1, 0],
    [0, 2],
    [-3, 0],
    [1, 1],
    [0, 0],
  ]);
  assert.equal(m.length, 5);
  assert.deepEqual(
    m.map((row, i) => row[i]),
    [1, 1, 1, 1, 0],
  );
  assert.equal(m[0]![1], 0);
  assert.equal(m[0]![2], -1);
  assert.ok(Math.abs(m[0]![3]! - Math.SQRT1_2) < 1e-12);
  assert.equal(m[3]![0], m[0]![3]);
  assert.equal(m[4]![1], 0);
});

test("similarity colours: warm for similar, blue for opposite, readable text", () => {
  assert.match(similarityColor(1).background, /^hsl\(18 /);
  assert.match(similarityColor(-0.9).background, /^hsl\(215 /);
  assert.equal(similarityColor(1).color, "#fff");
  assert.equal(similarityColor(0).color, "#1d1d1f");
  assert.equal(similarityColor(0.9, 0.9).background, similarityColor(0).background, "the floor is the palest warm cell");
});

test("colour floor: the lowest positive off-diagonal similarity, 0 for a single text or negative pairs", () => {
  assert.equal(
    colorFloor([
      [1, 0.9, 0.92],
      [0.9, 1, 0.95],
      [0.92, 0.95, 1],
    ]),
    0.9,
  );
  assert.equal(
    colorFloor([
      [1, -0.2],
      [-0.2, 1],
    ]),
    0,
  );
  assert.equal(colorFloor([[1]]), 0);
});

test("latency window keeps the last N and answers nearest-rank percentiles", () => {
  const w = new LatencyWindow(4);
  assert.equal(w.percentile(50), undefined);
  for (const ms of [100, 1, 2, 3, 4]) w.add(ms);
  assert.equal(w.count, 4);
  assert.equal(w.percentile(50), 2);
  assert.equal(w.percentile(100), 4);
  assert.equal(w.last(), 4);
  assert.equal(formatMs(0.84), "0.8 ms");
  assert.equal(formatMs(1_400), "1.4 s");
});
