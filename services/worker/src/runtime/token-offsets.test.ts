import assert from "node:assert/strict";
import { test } from "node:test";
import { alignTokens } from "./token-offsets.ts";

const spans = (text: string, tokens: string[]): [number, number][] => alignTokens(text, tokens).map((s) => [s.start, s.end]);

test("words, punctuation and ## pieces map to their characters", () => {
  assert.deepEqual(spans("Hello, tokenization!", ["hello", ",", "token", "##ization", "!"]), [
    [0, 5],
    [5, 6],
    [7, 12],
    [12, 19],
    [19, 20],
  ]);
});

test("accents and case are folded as BertNormalizer folds them; offsets are code points", () => {
  // "😀" is one code point (two UTF-16 units): the offsets after it count it once.
  assert.deepEqual(spans("Café 😀 Über", ["cafe", "[UNK]", "uber"]), [
    [0, 4],
    [5, 6],
    [7, 11],
  ]);
});

test("a token that cannot be found gets an empty span where the last one ended", () => {
  assert.deepEqual(spans("ab cd", ["ab", "zz", "cd"]), [
    [0, 2],
    [3, 3],
    [3, 5],
  ]);
});
