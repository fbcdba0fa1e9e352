import assert from "node:assert/strict";
import { test } from "node:test";
import { Tokenizer } from "@huggingface/tokenizers";
import { buildTokenizerConfig, buildTokenizerJson } from "./tokenizer-json.ts";
import { BERT_VOCAB_SIZE, buildVocab, SPECIAL_TOKENS } from "./vocab.ts";

const vocab = buildVocab();
// Round-trip through JSON text, exactly as a consumer reads tokenizer.json from disk.
const tokenizer = new Tokenizer(JSON.parse(JSON.stringify(buildTokenizerJson(vocab))), buildTokenizerConfig(128));
const { cls, sep, unk, pad, mask } = SPECIAL_TOKENS;

test("vocabulary: BERT size and special ids, no duplicates, deterministic", () => {
  assert.equal(vocab.length, BERT_VOCAB_SIZE);
  assert.equal(new Set(vocab).size, vocab.length);
  for (const s of [pad, unk, cls, sep, mask]) assert.equal(vocab[s.id], s.token);
  assert.deepEqual(buildVocab(), vocab);
  for (const t of ["a", "##a", "7", "##7", "th", "##th", "the", "##ing", "20", "##24", ",", "!", "ß", "##e"]) {
    assert.ok(vocab.includes(t), `missing ${t}`);
  }
});

test('"Hello, world!" -> [CLS] ... [SEP] without [UNK]', () => {
  const e = tokenizer.encode("Hello, world!");
  assert.equal(e.ids[0], cls.id);
  assert.equal(e.ids.at(-1), sep.id);
  assert.ok(!e.ids.includes(unk.id), e.tokens.join(" "));
  assert.deepEqual(e.tokens, ["[CLS]", "hel", "##lo", ",", "wor", "##ld", "!", "[SEP]"]);
  assert.deepEqual(
    e.attention_mask,
    e.ids.map(() => 1),
  );
  assert.equal(tokenizer.decode(e.ids, { skip_special_tokens: true }), "hello, world!");
});

test("English text: ~1 token per 3 letters, no [UNK], ids in range", () => {
  const text =
    "Shoal serves fleets of small embedding models from shared hardware; " +
    "requests travel through a gateway, Kafka and pulling ONNX Runtime workers in 2024.";
  const e = tokenizer.encode(text);
  assert.ok(!e.ids.includes(unk.id), e.tokens.join(" "));
  assert.ok(e.ids.every((id: number) => Number.isInteger(id) && id >= 0 && id < BERT_VOCAB_SIZE));
  const letters = text.replace(/[^a-z]/gi, "").length;
  const wordPieces = e.tokens.filter((t: string) => /[a-z]/.test(t) && !t.startsWith("[")).length;
  const lettersPerToken = letters / wordPieces;
  assert.ok(lettersPerToken > 2.4 && lettersPerToken <= 3, `letters per token ${lettersPerToken}`);
});

test("normalizer lowercases and strips accents; pairs get type ids", () => {
  assert.deepEqual(tokenizer.encode("Café RÉSUMÉ").tokens, ["[CLS]", "caf", "##e", "res", "##ume", "[SEP]"]);
  const pair = tokenizer.encode("query", { text_pair: "passage", return_token_type_ids: true });
  assert.deepEqual(pair.tokens, ["[CLS]", "que", "##ry", "[SEP]", "pas", "##sag", "##e", "[SEP]"]);
  assert.deepEqual(pair.token_type_ids, [0, 0, 0, 0, 1, 1, 1, 1]);
});

test("special tokens written literally are recognised", () => {
  assert.deepEqual(tokenizer.encode("a [MASK] b", { add_special_tokens: false }).ids, [vocab.indexOf("a"), mask.id, vocab.indexOf("b")]);
});
