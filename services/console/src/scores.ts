/**
 * Bar lengths (0..1) for a list of scores. Probabilities (all within 0..1: sigmoid rerankers,
 * classifiers) are drawn as they are, so 0.9 is 90% of the track whatever the other scores are;
 * raw logits (a reranker without activation) are scaled from the lowest (a sliver) to the highest
 * (a full bar). A NaN gets an empty bar.
 */
export function barFractions(scores: readonly number[]): number[] {
  const finite = scores.filter((s) => Number.isFinite(s));
  if (finite.every((s) => s >= 0 && s <= 1)) return scores.map((s) => (Number.isFinite(s) ? s : 0));
  const lo = Math.min(...finite);
  const hi = Math.max(...finite);
  const MIN = 0.04;
  return scores.map((s) => (!Number.isFinite(s) ? 0 : hi === lo ? 1 : MIN + ((s - lo) / (hi - lo)) * (1 - MIN)));
}

/** A score for people: 4 decimals for probabilities, 2 for logits. */
export function formatScore(score: number): string {
  if (!Number.isFinite(score)) return String(score);
  return score >= 0 && score <= 1 ? score.toFixed(4) : score.toFixed(2);
}

/** A percentage for a bar's CSS width. */
export function percent(fraction: number): string {
  return `${(Math.min(1, Math.max(0, fraction)) * 100).toFixed(1)}%`;
}
