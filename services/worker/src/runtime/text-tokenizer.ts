/**
 * Text → token ids for one model, with the truncation that `@huggingface/tokenizers` lacks:
 * the special-token frame ([CLS] … [SEP] for BERT) is kept and the middle is cut.
 */
import { readFile } from 'node:fs/promises';
import { Tokenizer } from '@huggingface/tokenizers';
import { InputTooLongError, ModelLoadError } from './errors.ts';
import type { ModelSpec } from '@shoal/common/model-manifest';

/** Result of {@link TextTokenizer.encode}. */
export interface EncodedText {
  /** Token ids, special tokens included; at most `maxSequenceLength` of them. */
  readonly ids: Int32Array;
  /** Tokens the model will see (`ids.length`), after any truncation. */
  readonly tokenCount: number;
  /** Whether tokens were cut to fit `maxSequenceLength`. */
  readonly truncated: boolean;
}

/** Options of {@link TextTokenizer.encode}. */
export interface EncodeOptions {
  /** Cut texts longer than the model's limit; when false they throw {@link InputTooLongError}. */
  readonly truncate: boolean;
}

/** A model's tokenizer. Synchronous and cheap enough (~0.5M tokens/s) for the worker's main thread. */
export interface TextTokenizer {
  readonly maxSequenceLength: number;
  /** Special tokens the template puts before / after the text ([CLS] / [SEP] for BERT: 1 / 1). */
  readonly specialPrefix: number;
  readonly specialSuffix: number;
  /**
   * @throws InputTooLongError when `truncate` is false and the text has more than
   *   `maxSequenceLength` tokens
   */
  encode(text: string, opts: EncodeOptions): EncodedText;
}

/**
 * CJK ideographs outside the BMP that BertNormalizer must space out. @huggingface/tokenizers 0.2.0
 * checks UTF-16 code units, so it never sees them and glues them to neighbouring words (ids then
 * differ from the Rust tokenizer). Ranges are those of the Rust `is_chinese_char` above U+FFFF.
 * See /work/shared/reference/platform-notes.md, "Tokenization".
 */
const ASTRAL_CJK = /([\u{20000}-\u{2A6DF}\u{2A700}-\u{2B81F}\u{2B920}-\u{2CEAF}\u{2F800}-\u{2FA1F}])/gu;
/** High surrogates of the planes above: a cheap pre-check before the Unicode regex. */
const MAYBE_ASTRAL_CJK = /[\uD840-\uD87E]/;

/** Pads astral CJK ideographs with spaces, as the Rust BertNormalizer does. Exported for tests. */
export function spaceAstralCjk(text: string): string {
  return MAYBE_ASTRAL_CJK.test(text) ? text.replace(ASTRAL_CJK, ' $1 ') : text;
}

/** Whether the tokenizer.json normalizer (possibly inside a Sequence) is BERT's with CJK handling. */
function handlesChineseChars(normalizer: unknown): boolean {
  if (typeof normalizer !== 'object' || normalizer === null) return false;
  const n = normalizer as { type?: unknown; handle_chinese_chars?: unknown; normalizers?: unknown };
  if (n.type === 'BertNormalizer') return n.handle_chinese_chars !== false;
  if (n.type === 'Sequence' && Array.isArray(n.normalizers)) return n.normalizers.some(handlesChineseChars);
  return false;
}

const BMP_CJK_CODE = (c: number): boolean =>
  (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff);
const WHITESPACE_CODE = (c: number): boolean =>
  c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0 || c === 0x3000 || (c >= 0x2000 && c <= 0x200a);

/**
 * The longest prefix of `text` (at most `maxChars`) that ends on a word boundary BERT
 * pre-tokenisation also splits at (before whitespace, after a BMP CJK ideograph), so its tokens
 * are exactly the first tokens of the whole text. Undefined when there is no such boundary.
 */
function boundaryPrefix(text: string, maxChars: number): string | undefined {
  for (let i = Math.min(maxChars, text.length - 1); i > 0; i--) {
    const c = text.charCodeAt(i);
    if (WHITESPACE_CODE(c)) return text.slice(0, i);
    if (BMP_CJK_CODE(c)) return text.slice(0, i + 1);
  }
  return undefined;
}

/**
 * Loads the tokenizer named by the spec and measures its special-token frame.
 * @throws ModelLoadError when tokenizer.json cannot be read or parsed, or its frame leaves no room
 *   for text within `maxSequenceLength`
 */
export async function createTextTokenizer(spec: ModelSpec): Promise<TextTokenizer> {
  const path = spec.tokenizerPath;
  let json: { normalizer?: unknown };
  let tokenizer: Tokenizer;
  try {
    json = JSON.parse(await readFile(path, 'utf8')) as { normalizer?: unknown };
    tokenizer = new Tokenizer(json, {});
  } catch (err) {
    throw new ModelLoadError(path, [`tokenizer: cannot be loaded (${(err as Error).message})`], { cause: err });
  }
  const spaceCjk = handlesChineseChars(json.normalizer);

  // Find where the template puts the text by encoding a probe with and without special tokens.
  // The package's declarations lose `Encoding` under NodeNext resolution: restate the type.
  const bare: number[] = tokenizer.encode('a', { add_special_tokens: false }).ids;
  const framed: number[] = tokenizer.encode('a', { add_special_tokens: true }).ids;
  const at = framed.findIndex((_, i) => bare.every((id, j) => framed[i + j] === id));
  if (bare.length === 0 || at < 0) {
    throw new ModelLoadError(path, ['tokenizer: cannot locate the text inside its special-token template']);
  }
  const specialPrefix = at;
  const specialSuffix = framed.length - at - bare.length;
  const limit = spec.maxSequenceLength;
  if (limit <= specialPrefix + specialSuffix) {
    throw new ModelLoadError(path, [
      `maxSequenceLength: ${limit} leaves no room for text after ${specialPrefix + specialSuffix} special tokens`,
    ]);
  }
  // Enough characters to yield more than `limit` tokens for any ordinary text (WordPiece emits
  // at most one token per character, usually one per 3-5): long inputs are encoded from a prefix.
  const prefixChars = Math.max(4096, limit * 16);

  const encodeIds = (text: string): number[] => tokenizer.encode(spaceCjk ? spaceAstralCjk(text) : text).ids as number[];

  const truncateIds = (ids: readonly number[]): Int32Array => {
    const out = new Int32Array(limit);
    const head = limit - specialSuffix;
    for (let i = 0; i < head; i++) out[i] = ids[i] ?? 0;
    for (let i = 0; i < specialSuffix; i++) out[head + i] = ids[ids.length - specialSuffix + i] ?? 0;
    return out;
  };

  return {
    maxSequenceLength: limit,
    specialPrefix,
    specialSuffix,
    encode(text: string, opts: EncodeOptions): EncodedText {
      if (opts.truncate && text.length > prefixChars) {
        const prefix = boundaryPrefix(text, prefixChars);
        const ids = prefix === undefined ? undefined : encodeIds(prefix);
        if (ids !== undefined && ids.length > limit) return { ids: truncateIds(ids), tokenCount: limit, truncated: true };
      }
      const ids = encodeIds(text);
      if (ids.length <= limit) return { ids: Int32Array.from(ids), tokenCount: ids.length, truncated: false };
      if (!opts.truncate) throw new InputTooLongError(ids.length, limit);
      return { ids: truncateIds(ids), tokenCount: limit, truncated: true };
    },
  };
}
