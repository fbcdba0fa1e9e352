import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { packGroup } from "./packed-group.ts";
import { poolInto } from "./pooling.ts";

// Two sequences of lengths 2 and 3 padded to 3, dims 2: token t of row b holds [10b + t, -(10b + t)].
const group = packGroup([
  [101, 102],
  [101, 7, 102],
]);
const hidden = new Float32Array([0, -0, 1, -1, 99, -99, 10, -10, 11, -11, 12, -12]);
const shape = { batch: 2, seqLen: 3, dims: 2 };

describe("packGroup", () => {
  it("pads with 0 and masks padding", () => {
    assert.equal(group.batch, 2);
    assert.equal(group.seqLen, 3);
    assert.deepEqual([...group.inputIds], [101n, 102n, 0n, 101n, 7n, 102n]);
    assert.deepEqual([...group.attentionMask], [1n, 1n, 0n, 1n, 1n, 1n]);
  });

  it("rejects empty groups, empty sequences and invalid ids", () => {
    assert.throws(() => packGroup([]), RangeError);
    assert.throws(() => packGroup([[101, 102], []]), /sequence 1 is empty/);
    assert.throws(() => packGroup([[101, 1.5]]), /invalid id at 1/);
  });

  it("packs no token types for single texts", () => {
    assert.equal(group.tokenTypeIds, undefined);
  });

  it("packs token types parallel to the ids, 0 in padding", () => {
    const pairs = packGroup(
      [
        [101, 7, 102, 8, 102],
        [101, 102, 9, 102],
      ],
      [[0, 0, 0, 1, 1], new Uint8Array([0, 0, 1, 1])],
    );
    assert.equal(pairs.seqLen, 5);
    assert.deepEqual([...pairs.inputIds], [101n, 7n, 102n, 8n, 102n, 101n, 102n, 9n, 102n, 0n]);
    assert.deepEqual([...pairs.attentionMask], [1n, 1n, 1n, 1n, 1n, 1n, 1n, 1n, 1n, 0n]);
    assert.ok(pairs.tokenTypeIds instanceof BigInt64Array);
    assert.deepEqual([...pairs.tokenTypeIds], [0n, 0n, 0n, 1n, 1n, 0n, 0n, 1n, 1n, 0n]);
    // Each buffer is its own, so each can be transferred.
    assert.notEqual(pairs.tokenTypeIds.buffer, pairs.inputIds.buffer);
  });

  it("rejects type ids that do not match the sequences", () => {
    assert.throws(
      () =>
        packGroup(
          [
            [101, 102],
            [101, 102],
          ],
          [[0, 0]],
        ),
      /group of 2 sequences has type ids for 1/,
    );
    assert.throws(() => packGroup([[101, 7, 102]], [[0, 0]]), /sequence 0 has 3 ids but 2 type ids/);
    assert.throws(() => packGroup([[101, 7, 102]], [[0, -1, 0]]), /invalid type id at 1/);
  });
});

describe("poolInto", () => {
  it("mean-pools only unmasked tokens, at the given output row", () => {
    const out = new Float32Array(6);
    poolInto(out, 1, hidden, group.attentionMask, shape, "mean");
    assert.deepEqual([...out], [0, 0, 0.5, -0.5, 11, -11]); // the padded 99 is ignored
  });

  it("takes the first token for cls", () => {
    const out = new Float32Array(4);
    poolInto(out, 0, hidden, group.attentionMask, shape, "cls");
    assert.deepEqual([...out], [0, -0, 10, -10]);
  });

  it("takes the last unmasked token for lasttoken (right padding: row 0's padded 99 is skipped)", () => {
    const out = new Float32Array(6);
    poolInto(out, 1, hidden, group.attentionMask, shape, "lasttoken");
    assert.deepEqual([...out], [0, 0, 1, -1, 12, -12]);
  });

  it("finds the last real token under left padding too, and leaves an all-padding row at zero", () => {
    // Row 0 left-padded [pad, a, b]; row 1 all padding. dims 2.
    const left = new Float32Array([9, 9, 3, 4, 5, 6, 7, 7, 8, 8, 9, 9]);
    const mask = new BigInt64Array([0n, 1n, 1n, 0n, 0n, 0n]);
    const out = new Float32Array(4);
    poolInto(out, 0, left, mask, shape, "lasttoken");
    assert.deepEqual([...out], [5, 6, 0, 0]);
  });

  it("copies [batch, dims] output as is for none", () => {
    const out = new Float32Array(4);
    poolInto(out, 0, new Float32Array([1, 2, 3, 4]), group.attentionMask, shape, "none");
    assert.deepEqual([...out], [1, 2, 3, 4]);
  });

  it("leaves a row with no unmasked token at zero", () => {
    const out = new Float32Array(2);
    poolInto(out, 0, new Float32Array([5, 5, 6, 6]), new BigInt64Array([0n, 0n]), { batch: 1, seqLen: 2, dims: 2 }, "mean");
    assert.deepEqual([...out], [0, 0]);
  });
});
