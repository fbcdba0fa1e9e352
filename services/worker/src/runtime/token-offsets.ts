/**
 * Character offsets of WordPiece tokens in the text they came from. @huggingface/tokenizers (JS)
 * gives ids and token strings but no offsets, so the tokens are aligned back to the text: both
 * sides folded as BertNormalizer folds them (NFD, accents stripped, lower case), each token found
 * at or after the previous one, `##` pieces continuing the word, `[UNK]` covering the next word.
 * Offsets are Unicode code points, end exclusive.
 */

/** One code point of the folded text and the index of the code point of the input it came from. */
interface Folded {
  readonly chars: string[];
  readonly source: number[];
  /** Code points in the input. */
  readonly length: number;
}

const MARK = /\p{Mn}/gu;
const SPACE = /^\s$/u;
const PUNCT = /^[\p{P}\p{S}]$/u;

function fold(text: string): Folded {
  const chars: string[] = [];
  const source: number[] = [];
  let at = 0;
  for (const cp of text) {
    for (const c of cp.normalize("NFD").replace(MARK, "").toLowerCase()) {
      chars.push(c);
      source.push(at);
    }
    at += 1;
  }
  return { chars, source, length: at };
}

/** [start, end) of a token, in code points. */
export interface TokenSpan {
  readonly start: number;
  readonly end: number;
}

/**
 * Offsets of `tokens` (a text's word pieces, no special or prompt tokens, in order) in `text`.
 * A token that cannot be found gets an empty span where the previous one ended.
 * @param unknown the tokenizer's unknown token (`[UNK]`)
 */
export function alignTokens(text: string, tokens: readonly string[], unknown = "[UNK]"): TokenSpan[] {
  const f = fold(text);
  const spans: TokenSpan[] = [];
  let pos = 0;
  const endOf = (i: number): number => (i >= f.chars.length ? f.length : f.source[i]!);
  for (const token of tokens) {
    const continues = token.startsWith("##") && token.length > 2;
    if (!continues) while (pos < f.chars.length && SPACE.test(f.chars[pos]!)) pos++;
    if (token === unknown) {
      const from = pos;
      if (pos < f.chars.length && PUNCT.test(f.chars[pos]!)) pos++;
      else while (pos < f.chars.length && !SPACE.test(f.chars[pos]!) && !PUNCT.test(f.chars[pos]!)) pos++;
      spans.push({ start: endOf(from), end: pos > from ? f.source[pos - 1]! + 1 : endOf(from) });
      continue;
    }
    const piece = [...(continues ? token.slice(2) : token).toLowerCase()];
    let at = pos;
    const matches = (i: number): boolean => piece.every((c, j) => f.chars[i + j] === c);
    if (!matches(at)) {
      // Normalisation we do not mirror (control characters, CJK spacing): look further on.
      at = -1;
      for (let i = pos; i + piece.length <= f.chars.length; i++) {
        if (matches(i)) {
          at = i;
          break;
        }
      }
    }
    if (at < 0) {
      spans.push({ start: endOf(pos), end: endOf(pos) });
      continue;
    }
    pos = at + piece.length;
    spans.push({ start: f.source[at]!, end: f.source[pos - 1]! + 1 });
  }
  return spans;
}
