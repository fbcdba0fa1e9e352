import { mulberry32 } from "@shoal/models";
import type { TextTokenizer } from "@shoal/worker/runtime/text-tokenizer";

const WORDS = (
  "the quick brown fox jumps over lazy dog inference worker pulls jobs from kafka and batches them across " +
  "requests embedding vectors are normalised before replying to gateway shoal fish swim together in large " +
  "groups near coral reefs tokenizer splits words into pieces contract review agents call nine small models"
).split(" ");

/** A text of exactly `tokens` tokens (special tokens included) for this tokenizer, or the closest below. */
export function textOfTokens(tokenizer: TextTokenizer, tokens: number, rand: () => number): { text: string; tokens: number } {
  const words: string[] = [];
  let best = { text: "a", tokens: tokenizer.encode("a", { truncate: true }).tokenCount };
  for (let guard = 0; guard < 1_000; guard++) {
    words.push(WORDS[Math.floor(rand() * WORDS.length)]!);
    const text = words.join(" ");
    const n = tokenizer.encode(text, { truncate: true }).tokenCount;
    if (n > tokens) break;
    best = { text, tokens: n };
    if (n === tokens) break;
  }
  return best;
}

/** `count` requests of `perRequest` texts with token lengths uniform in [minTokens, maxTokens]. */
export function raggedRequests(
  tokenizer: TextTokenizer,
  opts: { count: number; perRequest: number; minTokens: number; maxTokens: number; seed: number },
): { texts: string[]; tokens: number[] }[] {
  const rand = mulberry32(opts.seed); // deterministic: every run replays the same workload
  return Array.from({ length: opts.count }, () => {
    const texts: string[] = [];
    const tokens: number[] = [];
    for (let i = 0; i < opts.perRequest; i++) {
      const target = opts.minTokens + Math.floor(rand() * (opts.maxTokens - opts.minTokens + 1));
      const t = textOfTokens(tokenizer, target, rand);
      texts.push(t.text);
      tokens.push(t.tokens);
    }
    return { texts, tokens };
  });
}

/** Percentile (nearest rank) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
