/** The label value every string past a bound's first `max` distinct ones gets. */
export const OTHER_LABEL = "other";

/**
 * Bounds a metric label that takes strings from records (a worker id from a status record): the
 * first `max` distinct values are kept as they are, every later one is `other`, so a stream of
 * forged ids cannot grow the metric series without end. Values are kept for the process's life:
 * a series, once exported, keeps its name.
 */
export function boundLabel(max: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= max) return OTHER_LABEL;
    seen.add(value);
    return value;
  };
}
