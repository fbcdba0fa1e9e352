/**
 * Text → token ids for one model, with the truncation that `@huggingface/tokenizers` lacks:
 * the special-token frame ([CLS] … [SEP] for BERT) is kept and the middle is cut. Also encodes
 * (query, document) pairs for cross-encoders, framed by the tokenizer's pair template and cut
 * `longest_first` as Hugging Face's fast tokenizers do.
 */
import { readFile } from "node:fs/promises";
import { Tokenizer } from "@huggingface/tokenizers";
import { InputTooLongError, ModelLoadError } from "./errors.ts";
import type { ModelSpec } from "@shoal/common/model-manifest";
import { longestFirstLengths, readPairTemplate, type PairTemplate } from "./pair-template.ts";

/** Result of {@link TextTokenizer.encode}. */
export interface EncodedText {
  /** Token ids, special tokens included; at most `maxSequenceLength` of them. */
  readonly ids: Int32Array;
  /** Tokens the model will see (`ids.length`), after any truncation. */
  readonly tokenCount: number;
  /** Whether tokens were cut to fit `maxSequenceLength`. */
  readonly truncated: boolean;
}

/** Result of {@link TextTokenizer.encodePair}. */
export interface EncodedPair {
  /** Token ids of the framed pair (BERT: `[CLS] query [SEP] document [SEP]`); at most `maxSequenceLength`. */
  readonly ids: Int32Array;
  /** Token type per id, as the pair template says (BERT: 0 through the first [SEP], 1 after). */
  readonly typeIds: Uint8Array;
  /** Tokens the model will see (`ids.length`), after any truncation. */
  readonly tokenCount: number;
  /** Whether query or document tokens were cut to fit `maxSequenceLength`. */
  readonly truncated: boolean;
}

/** Options of {@link TextTokenizer.encode} and {@link TextTokenizer.encodePair}. */
export interface EncodeOptions {
  /** Cut texts longer than the model's limit; when false they throw {@link InputTooLongError}. */
  readonly truncate: boolean;
  /**
   * Which end of a single text loses tokens (default `end`). `start` keeps the special tokens
   * and the prompt and drops the first tokens of the text. Pairs are always cut `longest_first`.
   */
  readonly from?: "start" | "end";
  /** Text put in front of the input (an embedder's prompt); its tokens are never cut. */
  readonly prompt?: string;
}

/** Result of {@link TextTokenizer.explain}: what {@link TextTokenizer.encode} gives, token by token. */
export interface ExplainedText extends EncodedText {
  /** The vocabulary's string of each id. */
  readonly tokens: readonly string[];
  /** Special tokens before the prompt ([CLS]) and after the text ([SEP]). */
  readonly specialPrefix: number;
  readonly specialSuffix: number;
  /** Tokens of the prompt, right after the special prefix. */
  readonly promptTokens: number;
  /** For each kept token, its position in the untruncated encoding (so offsets can be mapped). */
  readonly positions: readonly number[];
  /** Tokens of the untruncated encoding, as the tokenizer gives them. */
  readonly allTokens: readonly string[];
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
  /**
   * Encodes a (query, document) pair for a cross-encoder with the tokenizer.json pair template.
   * With `truncate`, a pair over `maxSequenceLength` is cut `longest_first` (tokens come off the
   * end of the longer segment; the template's special tokens stay), matching Hugging Face fast
   * tokenizers and so sentence-transformers' CrossEncoder. Empty texts give empty segments.
   * @throws InputTooLongError when `truncate` is false and the framed pair has more than
   *   `maxSequenceLength` tokens
   * @throws Error when the tokenizer has no usable pair template (createTextTokenizer already
   *   refuses such a tokenizer for a rerank model)
   */
  encodePair(query: string, document: string, opts: EncodeOptions): EncodedPair;
  /** {@link encode} with token strings and positions (Tokenize); the ids are the same. */
  explain(text: string, opts: EncodeOptions): ExplainedText;
}

/**
 * CJK ideographs outside the BMP that BertNormalizer must space out. @huggingface/tokenizers 0.2.0
 * checks UTF-16 code units, so it never sees them and glues them to neighbouring words (ids then
 * differ from the Rust tokenizer). Ranges are those of the Rust `is_chinese_char` above U+FFFF.
 * Measured: ids matched the Rust tokenizer on 996 of 1,000 varied texts, and the 4 misses were
 * all such characters; spacing them out removed every one.
 */
const ASTRAL_CJK = /([\u{20000}-\u{2A6DF}\u{2A700}-\u{2B81F}\u{2B920}-\u{2CEAF}\u{2F800}-\u{2FA1F}])/gu;
/** High surrogates of the planes above: a cheap pre-check before the Unicode regex. */
const MAYBE_ASTRAL_CJK = /[\uD840-\uD87E]/;

/** Pads astral CJK ideographs with spaces, as the Rust BertNormalizer does. Exported for tests. */
export function spaceAstralCjk(text: string): string {
  return MAYBE_ASTRAL_CJK.test(text) ? text.replace(ASTRAL_CJK, " $1 ") : text;
}

/**
 * A character BERT's pre-tokenizer never splits a word at and its normalizer never removes: a
 * letter, decimal digit or symbol, but not ASCII punctuation or symbols (split off) nor a CJK
 * ideograph (spaced out) nor U+FFFD (removed with the controls). For `v`-flag regular expressions.
 */
const BERT_WORD_CHAR = String.raw`[[\p{L}\p{Nd}\p{S}]--[\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E]--[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\u{20000}-\u{3FFFF}\uFFFD]]`;

/** Whether the tokenizer.json normalizer (possibly inside a Sequence) is BERT's, and the only one. */
function bertNormalizer(normalizer: unknown): boolean {
  return typeof normalizer === "object" && normalizer !== null && (normalizer as { type?: unknown }).type === "BertNormalizer";
}

/** Whether the tokenizer.json normalizer (possibly inside a Sequence) is BERT's with CJK handling. */
function handlesChineseChars(normalizer: unknown): boolean {
  if (typeof normalizer !== "object" || normalizer === null) return false;
  const n = normalizer as { type?: unknown; handle_chinese_chars?: unknown; normalizers?: unknown };
  if (n.type === "BertNormalizer") return n.handle_chinese_chars !== false;
  if (n.type === "Sequence" && Array.isArray(n.normalizers)) return n.normalizers.some(handlesChineseChars);
  return false;
}

const BMP_CJK_CODE = (c: number): boolean => (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff);
const WHITESPACE_CODE = (c: number): boolean => c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0xa0 || c === 0x3000 || (c >= 0x2000 && c <= 0x200a);

/** ASCII punctuation, which BertPreTokenizer always splits into a word of its own. */
const ASCII_PUNCT_CODE = (c: number): boolean => (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);

/**
 * The longest prefix of `text` (at most `maxChars`) that ends on a word boundary the
 * pre-tokeniser also splits at (before whitespace, after a BMP CJK ideograph, and with
 * `splitsPunctuation` before ASCII punctuation), so its tokens are exactly the first tokens of the
 * whole text. Undefined when there is no such boundary.
 */
export function boundaryPrefix(text: string, maxChars: number, splitsPunctuation: boolean): string | undefined {
  for (let i = Math.min(maxChars, text.length - 1); i > 0; i--) {
    const c = text.charCodeAt(i);
    if (WHITESPACE_CODE(c) || (splitsPunctuation && ASCII_PUNCT_CODE(c))) return text.slice(0, i);
    if (BMP_CJK_CODE(c)) return text.slice(0, i + 1);
  }
  return undefined;
}

/** Whether the tokenizer.json pre-tokenizer (possibly inside a Sequence) is BERT's, which splits off every punctuation character. */
function splitsPunctuation(preTokenizer: unknown): boolean {
  if (typeof preTokenizer !== "object" || preTokenizer === null) return false;
  const p = preTokenizer as { type?: unknown; pretokenizers?: unknown };
  if (p.type === "BertPreTokenizer") return true;
  if (p.type === "Sequence" && Array.isArray(p.pretokenizers)) return p.pretokenizers.some(splitsPunctuation);
  return false;
}

/** max_input_chars_per_word of a WordPiece model (default 100); undefined when not WordPiece. */
function wordPieceMaxChars(model: unknown): number | undefined {
  const m = model as { type?: unknown; max_input_chars_per_word?: unknown } | null;
  if (m === null || typeof m !== "object" || m.type !== "WordPiece") return undefined;
  return typeof m.max_input_chars_per_word === "number" && Number.isInteger(m.max_input_chars_per_word) ? m.max_input_chars_per_word : 100;
}

/** Characters of the longest piece of a WordPiece vocabulary (without its `##`); 0 when not WordPiece. */
function longestPieceChars(model: unknown): number {
  const m = model as { type?: unknown; vocab?: unknown } | null;
  if (m === null || typeof m !== "object" || m.type !== "WordPiece" || typeof m.vocab !== "object" || m.vocab === null) return 0;
  let longest = 0;
  for (const piece of Object.keys(m.vocab)) longest = Math.max(longest, piece.startsWith("##") ? piece.length - 2 : piece.length);
  return longest;
}

/**
 * Loads the tokenizer named by the spec and measures its special-token frame.
 * @throws ModelLoadError when tokenizer.json cannot be read or parsed, or its frame leaves no room
 *   for text within `maxSequenceLength`
 */
export async function createTextTokenizer(spec: ModelSpec): Promise<TextTokenizer> {
  const path = spec.tokenizerPath;
  let json: { normalizer?: unknown; pre_tokenizer?: unknown; post_processor?: unknown; model?: unknown };
  let tokenizer: Tokenizer;
  try {
    json = JSON.parse(await readFile(path, "utf8")) as typeof json;
    tokenizer = new Tokenizer(json, {});
  } catch (err) {
    throw new ModelLoadError(path, [`tokenizer: cannot be loaded (${(err as Error).message})`], { cause: err });
  }
  const spaceCjk = handlesChineseChars(json.normalizer);
  const punctuation = splitsPunctuation(json.pre_tokenizer);

  // Find where the template puts the text by encoding a probe with and without special tokens.
  // The package's declarations lose `Encoding` under NodeNext resolution: restate the type.
  const bare: number[] = tokenizer.encode("a", { add_special_tokens: false }).ids;
  const framed: number[] = tokenizer.encode("a", { add_special_tokens: true }).ids;
  const at = framed.findIndex((_, i) => bare.every((id, j) => framed[i + j] === id));
  if (bare.length === 0 || at < 0) {
    throw new ModelLoadError(path, ["tokenizer: cannot locate the text inside its special-token template"]);
  }
  const specialPrefix = at;
  const specialSuffix = framed.length - at - bare.length;
  const limit = spec.maxSequenceLength;
  if (limit <= specialPrefix + specialSuffix) {
    throw new ModelLoadError(path, [`maxSequenceLength: ${limit} leaves no room for text after ${specialPrefix + specialSuffix} special tokens`]);
  }
  // Pairs: read from the JSON rather than asked of the library, whose pair encoding differs from
  // the Rust reference for RoBERTa (see pair-template.ts). Only a reranker must have one.
  const pairTemplate = readPairTemplate(json.post_processor);
  const pairProblem =
    typeof pairTemplate === "string"
      ? `tokenizer: ${pairTemplate}`
      : limit - pairTemplate.specialCount < 2
        ? `maxSequenceLength: ${limit} leaves less than one token each for query and document after ${pairTemplate.specialCount} special tokens`
        : undefined;
  if (pairProblem !== undefined && spec.task === "rerank") throw new ModelLoadError(path, [pairProblem]);

  // Compute bounded before compute: a long text is encoded from a prefix that ends on a word
  // boundary. A WordPiece token covers at most the vocabulary's longest piece's characters (an
  // [UNK] covers a whole word, which only makes tokens fewer, and the prefix then falls back to the
  // whole text), so (limit + 1) × longest piece characters are enough to yield more than `limit`
  // tokens of ordinary text; at least 4 per token, and never more than 16 (measured: English
  // averages 4-5 characters per token). The ids are the whole text's first ones: proven by the
  // property test in text-tokenizer.test.ts.
  const pieceChars = Math.min(16, Math.max(4, longestPieceChars(json.model)));
  const prefixChars = Math.max(1024, (limit + 1) * pieceChars);
  // A word of more than max_input_chars_per_word characters is one [UNK] however long it is: runs
  // of characters that normalisation never removes, longer than that, are cut to one character
  // more, so a 32K-character "word" costs what a 101-character one does. Latin and Cyrillic letters
  // and digits under any normaliser; under BERT's (NFD, accents stripped, lower case: it removes
  // only marks and controls), every letter, digit and non-ASCII symbol but CJK ideographs (spaced
  // out into words of their own), each with the marks after it: a Greek, Hangul or emoji "word"
  // of 32,000 characters took 6–14 ms to tokenize in one step (issue #52), now ~0.1 ms.
  const unkChars = wordPieceMaxChars(json.model);
  const longRun =
    unkChars === undefined
      ? undefined
      : bertNormalizer(json.normalizer)
        ? new RegExp(`(?:${BERT_WORD_CHAR}\\p{M}*){${unkChars + 2},}`, "gv")
        : new RegExp(`[A-Za-z0-9\\u00C0-\\u024F\\u0400-\\u04FF]{${unkChars + 2},}`, "g");
  const runHead = unkChars === undefined ? undefined : new RegExp(`^(?:${BERT_WORD_CHAR}\\p{M}*){${unkChars + 1}}`, "v");
  const shorten = (text: string): string =>
    longRun === undefined ? text : text.replace(longRun, (run) => runHead?.exec(run)?.[0] ?? run.slice(0, unkChars! + 1));
  /**
   * The ids of a boundary prefix of `text` when they already number more than `cap` (then they
   * are the whole text's first ids), else undefined. Prefixes grow geometrically from 2 × cap
   * characters up to `prefixChars`, so dense text (CJK, punctuation) is cut early.
   */
  const fromPrefix = (text: string, cap: number, encodeFn: (t: string) => number[]): number[] | undefined => {
    for (let chars = Math.min(prefixChars, 2 * (cap + 2)); text.length > chars; chars = Math.min(prefixChars, chars * 2)) {
      const prefix = boundaryPrefix(text, chars, punctuation);
      const ids = prefix === undefined ? undefined : encodeFn(prefix);
      if (ids !== undefined && ids.length > cap) return ids;
      if (chars >= prefixChars) break;
    }
    return undefined;
  };

  const encodeIds = (text: string): number[] => tokenizer.encode(shorten(spaceCjk ? spaceAstralCjk(text) : text)).ids as number[];
  const segmentIds = (text: string): number[] =>
    tokenizer.encode(shorten(spaceCjk ? spaceAstralCjk(text) : text), { add_special_tokens: false }).ids as number[];

  /**
   * A pair segment's ids without special tokens. With `cap`, a long text is encoded from a
   * boundary prefix when that already gives more than `cap` tokens: the ids are then its first
   * tokens and `whole` is false (the text has at least `ids.length` tokens).
   */
  // A rerank job pairs one query with every document: the query's segment is remembered (per cap),
  // so it is encoded once per job, not once per document.
  let lastQuery: { text: string; byCap: Map<number | undefined, { ids: number[]; whole: boolean }> } | undefined;
  const querySegment = (text: string, cap: number | undefined): { ids: number[]; whole: boolean } => {
    if (lastQuery?.text !== text) lastQuery = { text, byCap: new Map() };
    let result = lastQuery.byCap.get(cap);
    if (result === undefined) {
      result = segment(text, cap);
      lastQuery.byCap.set(cap, result);
    }
    return result;
  };
  const segment = (text: string, cap: number | undefined): { ids: number[]; whole: boolean } => {
    if (cap !== undefined) {
      const ids = fromPrefix(text, cap, segmentIds);
      if (ids !== undefined) return { ids, whole: false };
    }
    return { ids: segmentIds(text), whole: true };
  };

  const encodePair = (template: PairTemplate, query: string, document: string, opts: EncodeOptions): EncodedPair => {
    const budget = limit - template.specialCount;
    let a = querySegment(query, opts.truncate ? budget : undefined);
    let b = segment(document, opts.truncate ? budget : undefined);
    // A segment encoded from a prefix is only known to have more than `budget` tokens. That is
    // enough for longest_first unless it leaves open which segment is longer; both are then cut
    // to half the budget and the order only decides who keeps the odd token of an odd budget:
    // measure whole in that case (two very long texts, rare) — but only up to a bound: past it
    // (hostile input: two huge texts, each far over the limit) the segment whose prefix gave more
    // tokens keeps the odd token, so compute stays bounded; the ids can then differ from Hugging
    // Face's in that one token.
    const order = (x: typeof a, y: typeof a): boolean => y.whole && x.ids.length > y.ids.length;
    if (budget % 2 === 1 && !(a.whole && b.whole) && !order(a, b) && !order(b, a) && query.length + document.length <= 4 * prefixChars) {
      if (!a.whole) a = querySegment(query, undefined);
      if (!b.whole) b = segment(document, undefined);
    }
    const total = a.ids.length + b.ids.length + template.specialCount;
    if (total > limit && !opts.truncate) throw new InputTooLongError(total, limit);
    const [na, nb] = longestFirstLengths(a.ids.length, b.ids.length, budget);
    const tokenCount = na + nb + template.specialCount;
    const ids = new Int32Array(tokenCount);
    const typeIds = new Uint8Array(tokenCount);
    let at = 0;
    for (const piece of template.pieces) {
      const src = piece.kind === "special" ? piece.ids : piece.segment === "A" ? a.ids : b.ids;
      const n = piece.kind === "special" ? src.length : piece.segment === "A" ? na : nb;
      for (let i = 0; i < n; i++) ids[at + i] = src[i]!;
      typeIds.fill(piece.typeId, at, at + n);
      at += n;
    }
    return { ids, typeIds, tokenCount, truncated: na < a.ids.length || nb < b.ids.length };
  };

  // A prompt's token count (without special tokens), remembered: a job uses one prompt.
  const promptCounts = new Map<string, number>();
  const promptTokenCount = (prompt: string | undefined): number => {
    if (prompt === undefined || prompt === "") return 0;
    let n = promptCounts.get(prompt);
    if (n === undefined) {
      n = segmentIds(prompt).length;
      promptCounts.set(prompt, n);
    }
    return n;
  };
  /**
   * The positions a cut keeps of `n` tokens: [0, head) and [tail, n). `end` keeps the first
   * tokens and the special suffix; `start` keeps the special prefix, the prompt and the last tokens.
   */
  const cut = (n: number, from: "start" | "end", promptTokens: number): { head: number; tail: number } => {
    if (from === "end") return { head: limit - specialSuffix, tail: n - specialSuffix };
    // At least one token of the text survives, even under a prompt that fills the limit.
    const head = specialPrefix + Math.min(promptTokens, limit - specialPrefix - specialSuffix - 1);
    return { head, tail: n - (limit - head) };
  };
  const truncateIds = (ids: readonly number[], from: "start" | "end", promptTokens: number): Int32Array => {
    const { head, tail } = cut(ids.length, from, promptTokens);
    const out = new Int32Array(limit);
    for (let i = 0; i < head; i++) out[i] = ids[i] ?? 0;
    for (let i = tail; i < ids.length; i++) out[head + i - tail] = ids[i] ?? 0;
    return out;
  };

  return {
    maxSequenceLength: limit,
    specialPrefix,
    specialSuffix,
    encode(text: string, opts: EncodeOptions): EncodedText {
      const from = opts.from ?? "end";
      const full = opts.prompt === undefined ? text : opts.prompt + text;
      // Cutting the end only needs the first tokens: a bounded prefix of a long text gives them.
      if (opts.truncate && from === "end") {
        const ids = fromPrefix(full, limit, encodeIds);
        if (ids !== undefined) return { ids: truncateIds(ids, from, 0), tokenCount: limit, truncated: true };
      }
      const ids = encodeIds(full);
      if (ids.length <= limit) return { ids: Int32Array.from(ids), tokenCount: ids.length, truncated: false };
      if (!opts.truncate) throw new InputTooLongError(ids.length, limit);
      return { ids: truncateIds(ids, from, promptTokenCount(opts.prompt)), tokenCount: limit, truncated: true };
    },
    explain(text: string, opts: EncodeOptions): ExplainedText {
      const from = opts.from ?? "end";
      const full = opts.prompt === undefined ? text : opts.prompt + text;
      const encoding = tokenizer.encode(shorten(spaceCjk ? spaceAstralCjk(full) : full));
      const allIds = encoding.ids as number[];
      const allTokens = encoding.tokens as string[];
      const promptTokens = promptTokenCount(opts.prompt);
      const base = { allTokens, specialPrefix, specialSuffix, promptTokens };
      if (allIds.length <= limit) {
        const positions = allIds.map((_, i) => i);
        return { ...base, ids: Int32Array.from(allIds), tokens: allTokens, positions, tokenCount: allIds.length, truncated: false };
      }
      if (!opts.truncate) throw new InputTooLongError(allIds.length, limit);
      const { head, tail } = cut(allIds.length, from, promptTokens);
      const positions = [...allIds.keys()].filter((i) => i < head || i >= tail);
      return {
        ...base,
        ids: Int32Array.from(positions, (i) => allIds[i]!),
        tokens: positions.map((i) => allTokens[i]!),
        positions,
        tokenCount: positions.length,
        truncated: true,
      };
    },
    encodePair(query: string, document: string, opts: EncodeOptions): EncodedPair {
      if (typeof pairTemplate === "string" || pairProblem !== undefined) {
        throw new Error(`cannot encode pairs with ${path}: ${pairProblem ?? pairTemplate}`);
      }
      return encodePair(pairTemplate, query, document, opts);
    },
  };
}
