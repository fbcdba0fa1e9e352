/**
 * Compute bounded before compute (#19 part 1): long texts are tokenized from a bounded prefix,
 * and that prefix gives exactly the ids of tokenizing the whole text.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { readFile } from "node:fs/promises";
import { Tokenizer } from "@huggingface/tokenizers";
import { mulberry32 } from "@shoal/models";
import { createTextTokenizer, spaceAstralCjk } from "./text-tokenizer.ts";
import { generatedModelDir } from "./test-models.ts";

/** Deterministic PRNG so a failure replays: the generator's mulberry32. */
const rng = mulberry32;

const PIECES = [
  "the",
  "model",
  "quick",
  "a",
  "x",
  "über",
  "naïve",
  "中文",
  "😀",
  "\u{20000}",
  "zzqqxx",
  "Hello",
  "42",
  "don't",
  "λόγος",
  "한국어",
  "e\u0301",
  "\uFFFD",
  "İ",
  "\u200D",
  "¨",
];
/** Long words (issue #52): Latin, Greek with accents, Hangul, emoji, marks, each past the 100-char rule when repeated. */
const RUNS = ["abcdéfghij", "αβγδεζηθίκ", "한국어문장", "😀🎉", "e\u0301e\u0301", "ab\uFFFDcd"];
const PUNCT = [".", ",", "!", "?", "-", "(", ")", '"', "...", "!!!!", "#", "@", "\u3002"];

/** A hostile-ish random text of about `chars` characters: words, punctuation runs, long words, no-space stretches. */
function randomText(next: () => number, chars: number): string {
  let out = "";
  while (out.length < chars) {
    const r = next();
    if (r < 0.45) out += PIECES[Math.floor(next() * PIECES.length)];
    else if (r < 0.7) out += PUNCT[Math.floor(next() * PUNCT.length)];
    else if (r < 0.85) out += " ";
    else if (r < 0.9) out += "\n\t ";
    else if (r < 0.95)
      out += RUNS[Math.floor(next() * RUNS.length)]!.repeat(1 + Math.floor(next() * 40)); // up to 400 chars: past WordPiece's 100-char [UNK] rule
    else out += "é".repeat(1 + Math.floor(next() * 8));
  }
  return out;
}

describe("bounded tokenizing gives the ids of the whole text (property, 300 seeded texts per limit)", () => {
  let spec: ModelSpec;
  let rerankSpec: ModelSpec;
  /** The library itself on the whole text: the reference (no prefix, no shortened runs). */
  let whole: (text: string) => number[];
  let wholeBare: (text: string) => number[];
  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny"));
    rerankSpec = await readModelDir(await generatedModelDir("tiny-rerank"));
    const library = new Tokenizer(JSON.parse(await readFile(spec.tokenizerPath, "utf8")), {});
    const pairLibrary = new Tokenizer(JSON.parse(await readFile(rerankSpec.tokenizerPath, "utf8")), {});
    whole = (text) => library.encode(spaceAstralCjk(text)).ids as number[];
    wholeBare = (text) => pairLibrary.encode(spaceAstralCjk(text), { add_special_tokens: false }).ids as number[];
  });

  for (const limit of [8, 33, 128]) {
    it(`encode, limit ${limit}`, async () => {
      const tok = await createTextTokenizer({ ...spec, maxSequenceLength: limit });
      const next = rng(limit);
      for (let i = 0; i < 300; i++) {
        const text = randomText(next, 200 + Math.floor(next() * 6_000));
        const full = whole(text);
        const e = tok.encode(text, { truncate: true });
        const expected = full.length <= limit ? full : [...full.slice(0, limit - 1), full[full.length - 1]!];
        assert.deepEqual([...e.ids], expected, `seed ${limit}, text ${i}`);
      }
    });

    it(`encodePair, limit ${limit}`, async () => {
      const tok = await createTextTokenizer({ ...rerankSpec, maxSequenceLength: limit });
      const next = rng(1000 + limit);
      for (let i = 0; i < 150; i++) {
        const query = randomText(next, 100 + Math.floor(next() * 4_000));
        const doc = randomText(next, 100 + Math.floor(next() * 4_000));
        const qa = wholeBare(query);
        const db = wholeBare(doc);
        const e = tok.encodePair(query, doc, { truncate: true });
        // [CLS] query.. [SEP] document.. [SEP]: the kept tokens are the first ones of each segment.
        const ids = [...e.ids];
        const sep = ids.indexOf(ids[ids.length - 1]!);
        assert.deepEqual(ids.slice(1, sep), qa.slice(0, sep - 1), `query, seed ${1000 + limit}, pair ${i}`);
        assert.deepEqual(ids.slice(sep + 1, -1), db.slice(0, ids.length - sep - 2), `document, seed ${1000 + limit}, pair ${i}`);
      }
    });
  }

  it("a 32K-character query without spaces against 256 documents is tokenized in milliseconds, not seconds", async () => {
    const tok = await createTextTokenizer(rerankSpec);
    for (const query of ["!".repeat(32_768), ".a".repeat(16_384), "中".repeat(32_768), "a".repeat(32_768)]) {
      const docs = Array.from({ length: 256 }, () => query);
      const started = performance.now();
      let longestMs = 0;
      for (const doc of docs) {
        const t = performance.now();
        const e = tok.encodePair(query, doc, { truncate: true });
        longestMs = Math.max(longestMs, performance.now() - t);
        assert.ok(e.tokenCount <= rerankSpec.maxSequenceLength);
      }
      const totalMs = performance.now() - started;
      console.log(`# huge rerank (${JSON.stringify(query.slice(0, 4))}…): ${totalMs.toFixed(1)} ms for 256 pairs, longest pair ${longestMs.toFixed(2)} ms`);
      assert.ok(totalMs < 2_000, `${totalMs} ms`);
    }
  });
});
