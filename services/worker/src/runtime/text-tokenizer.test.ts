import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { InputTooLongError, ModelLoadError } from './errors.ts';
import { readModelDir, type ModelSpec } from '@shoal/common/model-manifest';
import { createTextTokenizer, spaceAstralCjk, type TextTokenizer } from './text-tokenizer.ts';
import { generatedModelDir, sentences, tempDir } from './test-models.ts';

// The generated vocabulary keeps BERT's special ids.
const CLS = 101;
const SEP = 102;
const UNK = 100;

describe('createTextTokenizer (generated tiny model, BERT WordPiece, limit 128)', () => {
  let spec: ModelSpec;
  let tok: TextTokenizer;
  /** Same vocabulary, no practical limit: the reference for untruncated ids. */
  let unlimited: TextTokenizer;
  before(async () => {
    spec = await readModelDir(await generatedModelDir('tiny'));
    tok = await createTextTokenizer(spec);
    unlimited = await createTextTokenizer({ ...spec, maxSequenceLength: 10_000_000 });
  });

  it('frames text with [CLS] ... [SEP]', () => {
    assert.equal(tok.specialPrefix, 1);
    assert.equal(tok.specialSuffix, 1);
    const e = tok.encode('Hello world', { truncate: false });
    assert.ok(e.ids instanceof Int32Array);
    assert.deepEqual([...e.ids], [CLS, 6200, 1366, 14863, 1355, SEP]);
    assert.equal(e.tokenCount, 6);
    assert.equal(e.truncated, false);
  });

  it('encodes empty and blank text as [CLS] [SEP]', () => {
    for (const text of ['', '   ', '\n\t']) {
      const e = tok.encode(text, { truncate: false });
      assert.deepEqual([...e.ids], [CLS, SEP]);
      assert.equal(e.tokenCount, 2);
    }
  });

  it('truncates long text to 128 tokens, keeping [CLS], the first 126 text tokens and [SEP]', () => {
    const text = sentences(40, 20, 3).join(' ');
    const full = unlimited.encode(text, { truncate: false }).ids;
    assert.ok(full.length > 300, `${full.length} tokens`);
    const e = tok.encode(text, { truncate: true });
    assert.equal(e.truncated, true);
    assert.equal(e.tokenCount, 128);
    assert.equal(e.ids.length, 128);
    assert.deepEqual([...e.ids], [...full.subarray(0, 127), SEP]);
  });

  it('throws InputTooLongError with the token count and limit when truncation is off', () => {
    const text = sentences(40, 20, 3).join(' ');
    const tokens = unlimited.encode(text, { truncate: false }).tokenCount;
    assert.throws(
      () => tok.encode(text, { truncate: false }),
      (err: unknown) => err instanceof InputTooLongError && err.tokens === tokens && err.limit === 128 && err.message.includes(`${tokens} tokens`),
    );
  });

  it('accepts exactly 128 tokens and rejects 129 without truncating', () => {
    // Each "x" is one word and one token (single letters are in the vocabulary).
    const at = tok.encode(Array(126).fill('x').join(' '), { truncate: false });
    assert.equal(at.tokenCount, 128);
    assert.equal(at.truncated, false);
    assert.throws(() => tok.encode(Array(127).fill('x').join(' '), { truncate: false }), { name: 'InputTooLongError', tokens: 129, limit: 128 });
    const cut = tok.encode(Array(127).fill('x').join(' '), { truncate: true });
    assert.equal(cut.tokenCount, 128);
    assert.equal(cut.truncated, true);
  });

  it('truncates very long inputs from a prefix with the same ids as encoding them whole', () => {
    const english = sentences(3000, 25, 5).join(' '); // ~400 KB
    const chinese = '中文文本没有空格'.repeat(20_000);
    const noSpaces = 'abc,'.repeat(50_000); // punctuation only: no whitespace boundary, whole-text fallback
    for (const text of [english, chinese, noSpaces]) {
      const full = unlimited.encode(text, { truncate: false }).ids;
      const e = tok.encode(text, { truncate: true });
      assert.deepEqual([...e.ids], [...full.subarray(0, 127), SEP]);
    }
  });

  it('spaces CJK ideographs outside the BMP so they split like the Rust tokenizer', () => {
    // U+20000 (Ext. B), U+2B920 (Ext. E), U+2F800 (compatibility supplement): not in the
    // vocabulary, so each becomes its own [UNK] instead of swallowing its neighbours.
    for (const ch of ['\u{20000}', '\u{2B920}', '\u{2F800}']) {
      const e = tok.encode(`a${ch}b`, { truncate: false });
      assert.deepEqual([...e.ids], [...tok.encode(`a ${ch} b`, { truncate: false }).ids]);
      assert.deepEqual([...e.ids], [CLS, 104, UNK, 105, SEP]);
    }
  });

  it('leaves other astral characters alone', () => {
    assert.equal(spaceAstralCjk('a😀b'), 'a😀b');
    assert.equal(spaceAstralCjk('a\u{2B81F}\u{2B820}b'), 'a \u{2B81F} \u{2B820}b'); // 2B820..2B91F is not CJK for BERT
    assert.equal(spaceAstralCjk('plain text'), 'plain text');
  });

  it('rejects a limit that leaves no room for text', async () => {
    await assert.rejects(createTextTokenizer({ ...spec, maxSequenceLength: 2 }), ModelLoadError);
  });

  it('rejects an unreadable tokenizer.json with ModelLoadError naming the file', async () => {
    const { dir, dispose } = await tempDir();
    try {
      const path = join(dir, 'tokenizer.json');
      await writeFile(path, '{"model": ');
      await assert.rejects(createTextTokenizer({ ...spec, tokenizerPath: path }), (err: unknown) => err instanceof ModelLoadError && err.path === path);
    } finally {
      await dispose();
    }
  });
});
