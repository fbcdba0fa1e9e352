/**
 * A synthetic, deterministic BERT-style WordPiece vocabulary (no word lists involved).
 *
 * Layout (ids are array indices):
 *   0 [PAD], 1..99 [unused0]..[unused98], 100 [UNK], 101 [CLS], 102 [SEP], 103 [MASK]  (BERT's ids)
 *   single characters: a-z, 0-9, ASCII punctuation, some Latin/Greek/Cyrillic letters, symbols
 *   "##" forms of the non-punctuation single characters (punctuation is always its own word)
 *   letter bigrams, then "##" letter bigrams, digit pairs and "##" digit pairs
 *   letter trigrams and "##" letter trigrams, ranked by English letter frequency and trimmed so
 *   the total is exactly `targetSize` (BERT's 30,522 by default)
 * WordPiece is greedy longest-match, so English words split into ~1 token per 3 letters.
 */

export const SPECIAL_TOKENS = {
  pad: { token: "[PAD]", id: 0 },
  unk: { token: "[UNK]", id: 100 },
  cls: { token: "[CLS]", id: 101 },
  sep: { token: "[SEP]", id: 102 },
  mask: { token: "[MASK]", id: 103 },
} as const;

export const BERT_VOCAB_SIZE = 30522;
export const CONTINUATION_PREFIX = "##";

const LETTERS = "abcdefghijklmnopqrstuvwxyz";
const DIGITS = "0123456789";
const ASCII_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
/** Unicode punctuation that BertPreTokenizer splits off as single-character words. */
const UNICODE_PUNCTUATION = "‘’‚“”„–—…«»¡¿·•†‡‰′″";
/** Letters that survive lowercasing + accent stripping (NFD + drop combining marks). */
const EXTRA_LATIN = "ßæøœðþłđıħ";
const GREEK = range(0x03b1, 0x03c9); // α..ω (includes final sigma ς)
const CYRILLIC = range(0x0430, 0x044f); // а..я
const SYMBOLS = "€£¥¢°©®±×÷µ§¶¤";

/** Relative English letter frequencies (percent), used only to rank trigrams for trimming. */
const LETTER_FREQUENCY: Readonly<Record<string, number>> = {
  e: 12.7,
  t: 9.06,
  a: 8.17,
  o: 7.51,
  i: 6.97,
  n: 6.75,
  s: 6.33,
  h: 6.09,
  r: 5.99,
  d: 4.25,
  l: 4.03,
  c: 2.78,
  u: 2.76,
  m: 2.41,
  w: 2.36,
  f: 2.23,
  g: 2.02,
  y: 1.97,
  p: 1.93,
  b: 1.29,
  v: 0.98,
  k: 0.77,
  j: 0.15,
  x: 0.15,
  q: 0.1,
  z: 0.07,
};

function range(from: number, to: number): string {
  let s = "";
  for (let c = from; c <= to; c++) s += String.fromCodePoint(c);
  return s;
}

function chars(s: string): string[] {
  return Array.from(s);
}

function freq(ch: string): number {
  const f = LETTER_FREQUENCY[ch];
  if (f === undefined) throw new Error(`no frequency for ${ch}`);
  return f;
}

/** All letter trigrams ranked by descending frequency score, ties broken alphabetically. */
function rankedTrigrams(): string[] {
  const all: { t: string; score: number }[] = [];
  for (const a of LETTERS)
    for (const b of LETTERS)
      for (const c of LETTERS) {
        all.push({ t: a + b + c, score: freq(a) * freq(b) * freq(c) });
      }
  all.sort((x, y) => y.score - x.score || (x.t < y.t ? -1 : x.t > y.t ? 1 : 0));
  return all.map((e) => e.t);
}

/** Builds the vocabulary; element i is the token with id i. */
export function buildVocab(targetSize: number = BERT_VOCAB_SIZE): string[] {
  const vocab: string[] = new Array<string>(104);
  vocab[0] = SPECIAL_TOKENS.pad.token;
  for (let i = 1; i <= 99; i++) vocab[i] = `[unused${i - 1}]`;
  vocab[100] = SPECIAL_TOKENS.unk.token;
  vocab[101] = SPECIAL_TOKENS.cls.token;
  vocab[102] = SPECIAL_TOKENS.sep.token;
  vocab[103] = SPECIAL_TOKENS.mask.token;

  const wordChars = [...chars(LETTERS), ...chars(DIGITS), ...chars(EXTRA_LATIN), ...chars(GREEK), ...chars(CYRILLIC), ...chars(SYMBOLS)];
  const punctuation = [...chars(ASCII_PUNCTUATION), ...chars(UNICODE_PUNCTUATION)];
  vocab.push(...wordChars, ...punctuation);
  vocab.push(...wordChars.map((c) => CONTINUATION_PREFIX + c));

  const bigrams: string[] = [];
  for (const a of LETTERS) for (const b of LETTERS) bigrams.push(a + b);
  const digitPairs: string[] = [];
  for (const a of DIGITS) for (const b of DIGITS) digitPairs.push(a + b);
  vocab.push(...bigrams, ...bigrams.map((t) => CONTINUATION_PREFIX + t));
  vocab.push(...digitPairs, ...digitPairs.map((t) => CONTINUATION_PREFIX + t));

  const budget = targetSize - vocab.length;
  if (budget < 0) throw new Error(`targetSize ${targetSize} is below the fixed vocabulary size ${vocab.length}`);
  const ranked = rankedTrigrams();
  const initialCount = Math.min(ranked.length, Math.floor(budget / 2));
  const continuationCount = Math.min(ranked.length, budget - initialCount);
  const keptInitial = ranked.slice(0, initialCount).sort();
  const keptContinuation = ranked.slice(0, continuationCount).sort();
  vocab.push(...keptInitial, ...keptContinuation.map((t) => CONTINUATION_PREFIX + t));

  const seen = new Set<string>();
  for (const t of vocab) {
    if (seen.has(t)) throw new Error(`duplicate vocabulary token ${t}`);
    seen.add(t);
  }
  return vocab;
}
