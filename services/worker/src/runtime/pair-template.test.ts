import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { longestFirstLengths, readPairTemplate, type PairTemplate } from "./pair-template.ts";

/** The template as a compact string: `101:0 A:0 102:0 B:1 102:1`. */
function show(t: PairTemplate | string): string {
  assert.ok(typeof t !== "string", t as string);
  return t.pieces.map((p) => (p.kind === "special" ? `${p.ids.join("+")}:${p.typeId}` : `${p.segment}:${p.typeId}`)).join(" ");
}

const bertTemplate = {
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
  pair: [
    { SpecialToken: { id: "[CLS]", type_id: 0 } },
    { Sequence: { id: "A", type_id: 0 } },
    { SpecialToken: { id: "[SEP]", type_id: 0 } },
    { Sequence: { id: "B", type_id: 1 } },
    { SpecialToken: { id: "[SEP]", type_id: 1 } },
  ],
  special_tokens: {
    "[CLS]": { id: "[CLS]", ids: [101], tokens: ["[CLS]"] },
    "[SEP]": { id: "[SEP]", ids: [102], tokens: ["[SEP]"] },
  },
};

describe("readPairTemplate", () => {
  it("reads a TemplateProcessing pair template, resolving special tokens", () => {
    const t = readPairTemplate(bertTemplate);
    assert.equal(show(t), "101:0 A:0 102:0 B:1 102:1");
    assert.equal((t as PairTemplate).specialCount, 3);
  });

  it("follows the template rather than assuming BERT (multi-id specials, other types)", () => {
    const t = readPairTemplate({
      ...bertTemplate,
      pair: [{ Sequence: { id: "B", type_id: 2 } }, { SpecialToken: { id: "X", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      special_tokens: { X: { id: "X", ids: [7, 8], tokens: ["x", "y"] } },
    });
    assert.equal(show(t), "B:2 7+8:0 A:0");
    assert.equal((t as PairTemplate).specialCount, 2);
  });

  it("reads BertProcessing and RobertaProcessing as the Rust library applies them", () => {
    assert.equal(show(readPairTemplate({ type: "BertProcessing", sep: ["[SEP]", 102], cls: ["[CLS]", 101] })), "101:0 A:0 102:0 B:1 102:1");
    // Rust gives every RoBERTa token type 0 (the JS library gives the second segment 1).
    assert.equal(show(readPairTemplate({ type: "RobertaProcessing", sep: ["</s>", 2], cls: ["<s>", 0], trim_offsets: true })), "0:0 A:0 2:0 2:0 B:0 2:0");
  });

  it("looks through a Sequence (ByteLevel only touches offsets) and handles no post-processor", () => {
    const seq = { type: "Sequence", processors: [{ type: "ByteLevel", trim_offsets: false }, bertTemplate] };
    assert.equal(show(readPairTemplate(seq)), "101:0 A:0 102:0 B:1 102:1");
    assert.equal(show(readPairTemplate(null)), "A:0 B:1");
    assert.equal((readPairTemplate(null) as PairTemplate).specialCount, 0);
  });

  it("explains templates it cannot read", () => {
    const cases: [unknown, RegExp][] = [
      [{ type: "Mystery" }, /"Mystery" is not supported/],
      [{ ...bertTemplate, pair: undefined }, /no "pair" template/],
      [{ ...bertTemplate, special_tokens: {} }, /pair\[0\]: special token "\[CLS\]" has no ids/],
      [{ ...bertTemplate, pair: [{ Sequence: { id: "A", type_id: 0 } }] }, /must place both sequences A and B/],
      [{ ...bertTemplate, pair: [{ Sequence: { id: "A", type_id: -1 } }] }, /type_id must be an integer/],
      [{ type: "BertProcessing", sep: ["[SEP]"] }, /needs "cls" and "sep"/],
      [{ type: "Sequence", processors: [bertTemplate, bertTemplate] }, /only one is supported/],
    ];
    for (const [json, why] of cases) {
      const t = readPairTemplate(json);
      assert.equal(typeof t, "string", JSON.stringify(json));
      assert.match(t as string, why);
    }
  });
});

describe("longestFirstLengths", () => {
  it("matches the Rust tokenizers truncate_encodings_longest_first table (max_length 7)", () => {
    // [query, document] -> [query, document] kept, from tokenizers/src/utils/truncation.rs.
    const table: [number, number, number, number][] = [
      [0, 0, 0, 0],
      [0, 2, 0, 2],
      [0, 4, 0, 4],
      [0, 8, 0, 7],
      [2, 0, 2, 0],
      [2, 2, 2, 2],
      [2, 4, 2, 4],
      [2, 8, 2, 5],
      [4, 0, 4, 0],
      [4, 2, 4, 2],
      [4, 4, 3, 4],
      [4, 8, 3, 4],
      [8, 0, 7, 0],
      [8, 2, 5, 2],
      [8, 4, 4, 3],
      [8, 8, 3, 4],
    ];
    for (const [q, d, kq, kd] of table) assert.deepEqual(longestFirstLengths(q, d, 7), [kq, kd], `${q}, ${d}`);
  });

  it('is "cut one token from the longer segment until it fits", up to who keeps an odd token', () => {
    for (let budget = 0; budget <= 12; budget++) {
      for (let q = 0; q <= 20; q++) {
        for (let d = 0; d <= 20; d++) {
          let [a, b] = [q, d];
          while (a + b > budget) {
            if (a >= b) a--;
            else b--;
          }
          const [kq, kd] = longestFirstLengths(q, d, budget);
          assert.equal(kq + kd, a + b, `${q}, ${d} / ${budget}`);
          assert.ok(Math.abs(kq - a) <= 1 && kq <= q && kd <= d, `${q}, ${d} / ${budget}: ${kq}, ${kd} vs ${a}, ${b}`);
        }
      }
    }
  });
});
