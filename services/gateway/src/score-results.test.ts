import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { JobStatus, ScoresOutputSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { JobFailedError } from "./errors.ts";
import { keepCount, labelInputs, rankDocuments, readScores } from "./score-results.ts";

const f32 = (values: number[]): Uint8Array => new Uint8Array(new Float32Array(values).buffer);
const out = (perInput: number, scores: number[], tokenCounts: number[], truncated: number[] = []) =>
  create(ScoresOutputSchema, { perInput, scores: f32(scores), tokenCounts, truncated });

function wrongShape(fn: () => unknown): void {
  assert.throws(fn, (err: unknown) => err instanceof JobFailedError && err.status === JobStatus.INTERNAL && /wrong shape/.test(err.message));
}

describe("readScores: the result must have the shape the request implies", () => {
  test("a matching result reads as float32 rows", () => {
    const rows = readScores(out(2, [0.25, 0.75, 0.5, 0.5], [3, 4], [1]), 2, 2);
    assert.deepEqual(Array.from(rows.scores), [0.25, 0.75, 0.5, 0.5]);
    assert.deepEqual(rows.tokenCounts, [3, 4]);
    assert.ok(rows.truncated.has(1) && !rows.truncated.has(0));
  });

  test("per_input, score count, token counts or byte length that disagree: Internal", () => {
    wrongShape(() => readScores(out(2, [1, 2], [3]), 1, 1));
    wrongShape(() => readScores(out(1, [1, 2, 3], [3, 3]), 2, 1));
    wrongShape(() => readScores(out(1, [1, 2], [3]), 2, 1));
    wrongShape(() => readScores(out(0, [], []), 0, 0));
    wrongShape(() => readScores(create(ScoresOutputSchema, { perInput: 1, scores: new Uint8Array(6), tokenCounts: [1] }), 1, 1));
  });

  test("unaligned bytes (a slice of a larger buffer) still read correctly", () => {
    const buf = new Uint8Array(9);
    buf.set(f32([0.5, -1]), 1);
    const rows = readScores(create(ScoresOutputSchema, { perInput: 1, scores: buf.subarray(1), tokenCounts: [1, 1] }), 2, 1);
    assert.deepEqual(Array.from(rows.scores), [0.5, -1]);
  });
});

test("keepCount: 0 or unset keeps all, larger than n keeps n", () => {
  assert.equal(keepCount(undefined, 5), 5);
  assert.equal(keepCount(0, 5), 5);
  assert.equal(keepCount(2, 5), 2);
  assert.equal(keepCount(9, 5), 5);
});

describe("rankDocuments", () => {
  const docs = ["d0", "d1", "d2", "d3", "d4"];
  const rows = readScores(out(1, [0.2, 0.9, 0.5, 0.9, 0.1], [5, 6, 7, 8, 9], [3]), 5, 1);

  test("highest score first, ties keep document order, tokens and truncation per document", () => {
    const { results, promptTokens } = rankDocuments(rows, docs, { returnDocuments: false });
    assert.deepEqual(
      results.map((r) => r.index),
      [1, 3, 2, 0, 4],
    );
    assert.deepEqual(results[1], { index: 3, score: Math.fround(0.9), document: "", tokens: 8, truncated: true });
    assert.equal(promptTokens, 35);
  });

  test("top_k keeps the best k; usage still counts every pair; return_documents copies the text", () => {
    const { results, promptTokens } = rankDocuments(rows, docs, { topK: 2, returnDocuments: true });
    assert.deepEqual(
      results.map((r) => [r.index, r.document]),
      [
        [1, "d1"],
        [3, "d3"],
      ],
    );
    assert.equal(promptTokens, 35);
    assert.equal(rankDocuments(rows, docs, { topK: 0, returnDocuments: false }).results.length, 5);
    assert.equal(rankDocuments(rows, docs, { topK: 50, returnDocuments: false }).results.length, 5);
  });

  test("raw logits (negative scores) and NaN: NaN sorts last, the rest by score", () => {
    const r = readScores(out(1, [-3, Number.NaN, -1, 2], [1, 1, 1, 1]), 4, 1);
    assert.deepEqual(
      rankDocuments(r, ["a", "b", "c", "d"], { returnDocuments: false }).results.map((x) => x.index),
      [3, 2, 0, 1],
    );
  });
});

describe("labelInputs", () => {
  const labels = ["neg", "neu", "pos"];
  const rows = readScores(out(3, [0.1, 0.2, 0.7, 0.4, 0.2, 0.4], [4, 6], [0]), 2, 3);

  test("per input in input order: labels by score, ties keep label order", () => {
    const { classifications, promptTokens } = labelInputs(rows, 2, labels, undefined);
    assert.equal(promptTokens, 10);
    assert.deepEqual(
      classifications.map((c) => [c.index, c.labels.map((l) => l.label), c.tokens, c.truncated]),
      [
        [0, ["pos", "neu", "neg"], 4, true],
        [1, ["neg", "pos", "neu"], 6, false],
      ],
    );
    assert.deepEqual(classifications[0]!.labels[0], { label: "pos", score: Math.fround(0.7) });
  });

  test("top_k keeps each input's best k labels", () => {
    const { classifications } = labelInputs(rows, 2, labels, 1);
    assert.deepEqual(
      classifications.map((c) => c.labels.map((l) => l.label)),
      [["pos"], ["neg"]],
    );
    assert.equal(labelInputs(rows, 2, labels, 0).classifications[0]!.labels.length, 3);
  });
});
