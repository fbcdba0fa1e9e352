import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { InputTooLongError, ModelLoadError } from "./errors.ts";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { Tokenizer } from "@huggingface/tokenizers";
import { longestFirstLengths } from "./pair-template.ts";
import { createTextTokenizer, spaceAstralCjk, type EncodedPair, type TextTokenizer } from "./text-tokenizer.ts";
import { generatedModelDir, sentences, tempDir } from "./test-models.ts";

// The generated vocabulary keeps BERT's special ids.
const CLS = 101;
const SEP = 102;
const UNK = 100;

describe("createTextTokenizer (generated tiny model, BERT WordPiece, limit 128)", () => {
  let spec: ModelSpec;
  let tok: TextTokenizer;
  /** Same vocabulary, no practical limit: the reference for untruncated ids. */
  let unlimited: TextTokenizer;
  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny"));
    tok = await createTextTokenizer(spec);
    unlimited = await createTextTokenizer({ ...spec, maxSequenceLength: 10_000_000 });
  });

  it("frames text with [CLS] ... [SEP]", () => {
    assert.equal(tok.specialPrefix, 1);
    assert.equal(tok.specialSuffix, 1);
    const e = tok.encode("Hello world", { truncate: false });
    assert.ok(e.ids instanceof Int32Array);
    assert.deepEqual([...e.ids], [CLS, 6200, 1366, 14863, 1355, SEP]);
    assert.equal(e.tokenCount, 6);
    assert.equal(e.truncated, false);
  });

  it("encodes empty and blank text as [CLS] [SEP]", () => {
    for (const text of ["", "   ", "\n\t"]) {
      const e = tok.encode(text, { truncate: false });
      assert.deepEqual([...e.ids], [CLS, SEP]);
      assert.equal(e.tokenCount, 2);
    }
  });

  it("truncates long text to 128 tokens, keeping [CLS], the first 126 text tokens and [SEP]", () => {
    const text = sentences(40, 20, 3).join(" ");
    const full = unlimited.encode(text, { truncate: false }).ids;
    assert.ok(full.length > 300, `${full.length} tokens`);
    const e = tok.encode(text, { truncate: true });
    assert.equal(e.truncated, true);
    assert.equal(e.tokenCount, 128);
    assert.equal(e.ids.length, 128);
    assert.deepEqual([...e.ids], [...full.subarray(0, 127), SEP]);
  });

  it("truncation from the start keeps [CLS], the prompt, the last text tokens and [SEP]; explain gives the same ids", () => {
    const text = sentences(40, 20, 3).join(" ");
    const prompt = "query: ";
    const bare = unlimited.encode(text, { truncate: false }).ids;
    const promptIds = unlimited.encode(prompt, { truncate: false }).ids.subarray(1, -1);
    const e = tok.encode(text, { truncate: true, from: "start", prompt });
    assert.equal(e.tokenCount, 128);
    const keep = 128 - 2 - promptIds.length;
    assert.deepEqual([...e.ids], [CLS, ...promptIds, ...bare.subarray(bare.length - 1 - keep, bare.length - 1), SEP]);
    const x = tok.explain(text, { truncate: true, from: "start", prompt });
    assert.deepEqual([...x.ids], [...e.ids]);
    assert.equal(x.promptTokens, promptIds.length);
    assert.equal(x.tokens.length, 128);
    assert.deepEqual([...tok.explain(text, { truncate: true }).ids], [...tok.encode(text, { truncate: true }).ids], "END: the bounded-prefix path agrees");
  });

  it("throws InputTooLongError with the token count and limit when truncation is off", () => {
    const text = sentences(40, 20, 3).join(" ");
    const tokens = unlimited.encode(text, { truncate: false }).tokenCount;
    assert.throws(
      () => tok.encode(text, { truncate: false }),
      (err: unknown) => err instanceof InputTooLongError && err.tokens === tokens && err.limit === 128 && err.message.includes(`${tokens} tokens`),
    );
  });

  it("accepts exactly 128 tokens and rejects 129 without truncating", () => {
    // Each "x" is one word and one token (single letters are in the vocabulary).
    const at = tok.encode(Array(126).fill("x").join(" "), { truncate: false });
    assert.equal(at.tokenCount, 128);
    assert.equal(at.truncated, false);
    assert.throws(() => tok.encode(Array(127).fill("x").join(" "), { truncate: false }), { name: "InputTooLongError", tokens: 129, limit: 128 });
    const cut = tok.encode(Array(127).fill("x").join(" "), { truncate: true });
    assert.equal(cut.tokenCount, 128);
    assert.equal(cut.truncated, true);
  });

  it("truncates very long inputs from a prefix with the same ids as encoding them whole", () => {
    const english = sentences(3000, 25, 5).join(" "); // ~400 KB
    const chinese = "中文文本没有空格".repeat(20_000);
    const noSpaces = "abc,".repeat(50_000); // punctuation only: no whitespace boundary, whole-text fallback
    for (const text of [english, chinese, noSpaces]) {
      const full = unlimited.encode(text, { truncate: false }).ids;
      const e = tok.encode(text, { truncate: true });
      assert.deepEqual([...e.ids], [...full.subarray(0, 127), SEP]);
    }
  });

  it("spaces CJK ideographs outside the BMP so they split like the Rust tokenizer", () => {
    // U+20000 (Ext. B), U+2B920 (Ext. E), U+2F800 (compatibility supplement): not in the
    // vocabulary, so each becomes its own [UNK] instead of swallowing its neighbours.
    for (const ch of ["\u{20000}", "\u{2B920}", "\u{2F800}"]) {
      const e = tok.encode(`a${ch}b`, { truncate: false });
      assert.deepEqual([...e.ids], [...tok.encode(`a ${ch} b`, { truncate: false }).ids]);
      assert.deepEqual([...e.ids], [CLS, 104, UNK, 105, SEP]);
    }
  });

  it("leaves other astral characters alone", () => {
    assert.equal(spaceAstralCjk("a😀b"), "a😀b");
    assert.equal(spaceAstralCjk("a\u{2B81F}\u{2B820}b"), "a \u{2B81F} \u{2B820}b"); // 2B820..2B91F is not CJK for BERT
    assert.equal(spaceAstralCjk("plain text"), "plain text");
  });

  it("rejects a limit that leaves no room for text", async () => {
    await assert.rejects(createTextTokenizer({ ...spec, maxSequenceLength: 2 }), ModelLoadError);
  });

  it("rejects an unreadable tokenizer.json with ModelLoadError naming the file", async () => {
    const { dir, dispose } = await tempDir();
    try {
      const path = join(dir, "tokenizer.json");
      await writeFile(path, '{"model": ');
      await assert.rejects(createTextTokenizer({ ...spec, tokenizerPath: path }), (err: unknown) => err instanceof ModelLoadError && err.path === path);
    } finally {
      await dispose();
    }
  });
});

describe("TextTokenizer.encodePair (generated tiny-rerank model, BERT pair template, limit 128)", () => {
  let spec: ModelSpec;
  let tok: TextTokenizer;
  let unlimited: TextTokenizer;
  /** The library's own pair encoding: the reference for untruncated BERT pairs. */
  let library: Tokenizer;
  before(async () => {
    spec = await readModelDir(await generatedModelDir("tiny-rerank"));
    tok = await createTextTokenizer(spec);
    unlimited = await createTextTokenizer({ ...spec, maxSequenceLength: 10_000_000 });
    library = new Tokenizer(JSON.parse(await readFile(spec.tokenizerPath, "utf8")), {});
  });

  /** Ids of a text without [CLS] / [SEP]. */
  const bare = (text: string): number[] => [...unlimited.encode(text, { truncate: false }).ids.subarray(1, -1)];
  /** `n` one-token words from `letters`, cycling. */
  const words = (n: number, letters: string): string => Array.from({ length: n }, (_, i) => letters[i % letters.length]).join(" ");
  const types = (e: EncodedPair): string => [...e.typeIds].join("");

  it("frames [CLS] query [SEP] document [SEP] with types 0 then 1, as the library does", () => {
    const pairs: [string, string][] = [
      ["what is the capital of france", "Paris is the capital of France."],
      ["shoal", "a school of fish swims together near coral reefs"],
      ["Hello, world!", "x"],
    ];
    for (const [q, d] of pairs) {
      const e = tok.encodePair(q, d, { truncate: false });
      assert.ok(e.ids instanceof Int32Array && e.typeIds instanceof Uint8Array);
      const [nq, nd] = [bare(q).length, bare(d).length];
      assert.deepEqual([...e.ids], [CLS, ...bare(q), SEP, ...bare(d), SEP]);
      assert.equal(types(e), "0".repeat(nq + 2) + "1".repeat(nd + 1));
      assert.equal(e.tokenCount, nq + nd + 3);
      assert.equal(e.truncated, false);
      const ref = library.encode(q, { text_pair: d, return_token_type_ids: true }) as { ids: number[]; token_type_ids: number[] };
      assert.deepEqual([...e.ids], ref.ids);
      assert.deepEqual([...e.typeIds], ref.token_type_ids);
    }
  });

  it("encodes empty queries and documents as empty segments", () => {
    const d = bare("a school of fish");
    for (const truncate of [false, true]) {
      assert.deepEqual([...tok.encodePair("", "a school of fish", { truncate }).ids], [CLS, SEP, ...d, SEP]);
      assert.deepEqual([...tok.encodePair("a school of fish", "  ", { truncate }).ids], [CLS, ...d, SEP, SEP]);
      const both = tok.encodePair("", "", { truncate });
      assert.deepEqual([...both.ids], [CLS, SEP, SEP]);
      assert.equal(types(both), "001");
    }
    const long = tok.encodePair("", words(300, "xyz"), { truncate: true });
    assert.equal(long.tokenCount, 128);
    assert.deepEqual([...long.ids], [CLS, SEP, ...bare(words(300, "xyz")).slice(0, 125), SEP]);
  });

  it("truncates longest_first: lengths as the Rust table, the end of each segment cut, special tokens kept", async () => {
    const small = await createTextTokenizer({ ...spec, maxSequenceLength: 10 }); // 7 tokens for the two segments
    const expected: [number, number, number, number][] = [
      [0, 8, 0, 7],
      [2, 8, 2, 5],
      [4, 4, 3, 4],
      [4, 8, 3, 4],
      [8, 0, 7, 0],
      [8, 2, 5, 2],
      [8, 4, 4, 3],
      [8, 8, 3, 4],
      [3, 4, 3, 4],
    ];
    for (const [nq, nd, kq, kd] of expected) {
      const q = words(nq, "abcdefgh");
      const d = words(nd, "pqrstuvw");
      const e = small.encodePair(q, d, { truncate: true });
      assert.deepEqual([...e.ids], [CLS, ...bare(q).slice(0, kq), SEP, ...bare(d).slice(0, kd), SEP], `${nq}, ${nd}`);
      assert.equal(types(e), "0".repeat(kq + 2) + "1".repeat(kd + 1));
      assert.equal(e.tokenCount, kq + kd + 3);
      assert.equal(e.truncated, kq < nq || kd < nd);
    }
  });

  it("at the limit: 128 tokens pass untruncated, 129 throw InputTooLongError without truncate", () => {
    const fits = tok.encodePair(words(25, "abc"), words(100, "xyz"), { truncate: false });
    assert.equal(fits.tokenCount, 128);
    assert.equal(fits.truncated, false);
    assert.throws(
      () => tok.encodePair(words(25, "abc"), words(101, "xyz"), { truncate: false }),
      (err: unknown) => err instanceof InputTooLongError && err.tokens === 129 && err.limit === 128,
    );
    const cut = tok.encodePair(words(25, "abc"), words(101, "xyz"), { truncate: true });
    assert.equal(cut.tokenCount, 128);
    assert.equal(cut.truncated, true);
    assert.deepEqual([...cut.ids.subarray(0, 27)], [CLS, ...bare(words(25, "abc")), SEP]); // the short query is whole
    assert.equal(cut.ids.at(-1), SEP);
  });

  it("cuts the longer side of a long pair: the document, the query, or both at 62 / 63", () => {
    const shortQ = "what is the capital of france";
    const longD = sentences(30, 20, 3).join(" ");
    const longQ = sentences(25, 20, 4).join(" ");
    const cases: [string, string][] = [
      [shortQ, longD],
      [longD, shortQ],
      [longQ, longD],
      [longD, longQ],
    ];
    for (const [q, d] of cases) {
      const [bq, bd] = [bare(q), bare(d)];
      const [kq, kd] = longestFirstLengths(bq.length, bd.length, 125);
      const e = tok.encodePair(q, d, { truncate: true });
      assert.deepEqual([...e.ids], [CLS, ...bq.slice(0, kq), SEP, ...bd.slice(0, kd), SEP]);
      assert.equal(e.tokenCount, 128);
    }
    // Both over half the budget: the longer keeps the odd token.
    assert.ok(bare(longQ).length < bare(longD).length && bare(longQ).length > 125);
    const both = tok.encodePair(longQ, longD, { truncate: true });
    assert.equal(types(both), "0".repeat(64) + "1".repeat(64)); // [CLS] 62 [SEP] | 63 [SEP]
    const swapped = tok.encodePair(longD, longQ, { truncate: true });
    assert.equal(types(swapped), "0".repeat(65) + "1".repeat(63));
  });

  it("truncates very long texts from a prefix with the same ids as encoding them whole", () => {
    const huge = sentences(3000, 25, 5).join(" "); // ~400 KB
    const huge2 = sentences(2000, 25, 6).join(" ");
    const chinese = "中文文本没有空格".repeat(20_000);
    const manyTokens = words(2000, "xyz"); // under the prefix threshold in characters, 2000 tokens
    const cases: [string, string][] = [
      ["short query", huge],
      [huge, "short document"],
      [huge, huge2],
      [huge2, huge],
      [chinese, huge],
      [manyTokens, huge],
      [huge, manyTokens],
    ];
    for (const [q, d] of cases) {
      const [bq, bd] = [bare(q), bare(d)];
      let [kq, kd] = longestFirstLengths(bq.length, bd.length, 125);
      const e = tok.encodePair(q, d, { truncate: true });
      // Two texts both far over the limit (and over the measuring bound): the odd token of the odd
      // budget goes by the prefixes, so compute stays bounded; either split is accepted.
      if (kq + kd === 125 && Math.min(kq, kd) === 62 && e.typeIds.indexOf(1) !== kq + 2) [kq, kd] = [kd, kq];
      assert.deepEqual([...e.ids], [CLS, ...bq.slice(0, kq), SEP, ...bd.slice(0, kd), SEP], `${q.slice(0, 20)} / ${d.slice(0, 20)}`);
      assert.equal(types(e), "0".repeat(kq + 2) + "1".repeat(kd + 1));
    }
  });

  it("follows the tokenizer.json pair template (a RoBERTa-style one here) rather than assuming BERT", async () => {
    const { dir, dispose } = await tempDir();
    try {
      const json = JSON.parse(await readFile(spec.tokenizerPath, "utf8")) as Record<string, unknown>;
      json.post_processor = { type: "RobertaProcessing", sep: ["[SEP]", SEP], cls: ["[CLS]", CLS], trim_offsets: true, add_prefix_space: false };
      const path = join(dir, "tokenizer.json");
      await writeFile(path, JSON.stringify(json));
      const roberta = await createTextTokenizer({ ...spec, tokenizerPath: path });
      const e = roberta.encodePair("a b", "x", { truncate: false });
      assert.deepEqual([...e.ids], [CLS, ...bare("a b"), SEP, SEP, ...bare("x"), SEP]);
      assert.equal(types(e), "0000000");
      // Four special tokens: 128 leaves 124 for the segments.
      const cut = roberta.encodePair(words(100, "ab"), words(100, "xy"), { truncate: true });
      assert.deepEqual([...cut.ids], [CLS, ...bare(words(62, "ab")), SEP, SEP, ...bare(words(62, "xy")), SEP]);
    } finally {
      await dispose();
    }
  });

  it("refuses a rerank model whose pair template it cannot read; other models load but cannot encode pairs", async () => {
    const { dir, dispose } = await tempDir();
    try {
      const json = JSON.parse(await readFile(spec.tokenizerPath, "utf8")) as Record<string, unknown>;
      // A pair template that never places the document (the library loads it: single texts work).
      const processor = json.post_processor as { pair: unknown[] };
      json.post_processor = { ...processor, pair: processor.pair.slice(0, 3) };
      const path = join(dir, "tokenizer.json");
      await writeFile(path, JSON.stringify(json));
      await assert.rejects(
        createTextTokenizer({ ...spec, tokenizerPath: path }),
        (err: unknown) => err instanceof ModelLoadError && err.path === path && /must place both sequences A and B/.test(err.message),
      );
      const embed = await readModelDir(await generatedModelDir("tiny"));
      const single = await createTextTokenizer({ ...embed, tokenizerPath: path });
      assert.deepEqual([...single.encode("shoal", { truncate: false }).ids], [CLS, ...bare("shoal"), SEP]);
      assert.throws(() => single.encodePair("a", "b", { truncate: true }), /cannot encode pairs/);
    } finally {
      await dispose();
    }
  });

  it("refuses a rerank limit that leaves no room for both segments", async () => {
    await assert.rejects(createTextTokenizer({ ...spec, maxSequenceLength: 4 }), /less than one token each for query and document/);
    assert.equal((await createTextTokenizer({ ...spec, maxSequenceLength: 5 })).encodePair("a b", "x y", { truncate: true }).tokenCount, 5);
  });
});
