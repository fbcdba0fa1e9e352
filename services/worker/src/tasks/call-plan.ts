/**
 * Cuts a phase's sub-batches (groups of item indexes, each padded to its longest item) into model
 * calls of at most `maxCallTokens` padded tokens: consecutive groups share a call while they fit,
 * a group larger than the cap is split into runs of items that fit (at least one item each).
 * Bounded calls are the preemption points of the worker's compute gate: between two calls an
 * interactive run may take the runtime.
 * @returns calls, each a list of groups (item indexes), in the order given
 */
export function planCalls(groups: readonly (readonly number[])[], tokens: readonly number[], maxCallTokens: number): number[][][] {
  const cost = (g: readonly number[]): number => g.length * Math.max(0, ...g.map((i) => tokens[i] ?? 0));
  const calls: number[][][] = [];
  let current: number[][] = [];
  let used = 0;
  const flush = (): void => {
    if (current.length > 0) calls.push(current);
    current = [];
    used = 0;
  };
  for (const group of groups) {
    const longest = Math.max(1, ...group.map((i) => tokens[i] ?? 0));
    const perPiece = Math.max(1, Math.floor(maxCallTokens / longest));
    for (let start = 0; start < group.length; start += perPiece) {
      const piece = group.slice(start, start + perPiece);
      const c = cost(piece);
      if (used > 0 && used + c > maxCallTokens) flush();
      current.push(piece);
      used += c;
    }
  }
  flush();
  return calls;
}
