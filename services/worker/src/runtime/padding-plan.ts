/**
 * Splits one batch of ragged sequences into sub-batches ("groups"), each run as one
 * `session.run()` padded to its longest member. Padding waste converts one-for-one into lost
 * throughput (cpu-ceiling.md), while every extra call costs a fixed overhead; the plan minimises
 * the sum of both.
 */

/** Options of {@link planSubBatches}. */
export interface SubBatchOptions {
  /** Fixed cost of one `session.run()`, in token-equivalents of compute (>= 0). */
  readonly perCallOverheadTokens: number;
  /** Most sequences in one call (>= 1). */
  readonly maxItemsPerCall: number;
}

/** Result of {@link paddingStats}. */
export interface PaddingStats {
  /** Sum of the sequence lengths. */
  readonly usefulTokens: number;
  /** Token positions computed: sum over groups of (members × longest member). */
  readonly paddedTokens: number;
  /** usefulTokens / paddedTokens (1 for an empty batch). */
  readonly usefulFraction: number;
}

function checkOptions(opts: SubBatchOptions): void {
  if (!(Number.isFinite(opts.perCallOverheadTokens) && opts.perCallOverheadTokens >= 0)) {
    throw new RangeError(`perCallOverheadTokens must be a finite number >= 0 (got ${opts.perCallOverheadTokens})`);
  }
  if (!(Number.isSafeInteger(opts.maxItemsPerCall) && opts.maxItemsPerCall >= 1)) {
    throw new RangeError(`maxItemsPerCall must be an integer >= 1 (got ${opts.maxItemsPerCall})`);
  }
}

/**
 * Groups item indexes so that the cost Σ over groups of (overhead + count × maxLen) is minimal
 * among partitions of the length-sorted order into contiguous runs of at most `maxItemsPerCall`
 * items (for this cost some optimal partition is always contiguous in sorted order). Ties go to
 * fewer calls. O(n × maxItemsPerCall).
 *
 * @param lengths token count of each item (special tokens included)
 * @returns groups of indexes into `lengths`, shortest group first; each group sorted by length
 */
export function planSubBatches(lengths: readonly number[], opts: SubBatchOptions): number[][] {
  checkOptions(opts);
  const n = lengths.length;
  if (n === 0) return [];
  for (const [i, len] of lengths.entries()) {
    if (!(Number.isSafeInteger(len) && len >= 0)) throw new RangeError(`lengths[${i}] must be an integer >= 0 (got ${len})`);
  }
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const sorted = order.map((i) => lengths[i]!);
  const overhead = opts.perCallOverheadTokens;
  const maxItems = opts.maxItemsPerCall;

  // cost[i] / calls[i]: best plan for the i shortest items; start[i]: where its last group begins.
  const cost = new Float64Array(n + 1);
  const calls = new Int32Array(n + 1);
  const start = new Int32Array(n + 1);
  for (let i = 1; i <= n; i++) {
    const maxLen = sorted[i - 1]!;
    let best = Infinity;
    let bestCalls = 0;
    let bestStart = 0;
    for (let j = Math.max(0, i - maxItems); j < i; j++) {
      const c = cost[j]! + overhead + (i - j) * maxLen;
      const k = calls[j]! + 1;
      if (c < best || (c === best && k < bestCalls)) {
        best = c;
        bestCalls = k;
        bestStart = j;
      }
    }
    cost[i] = best;
    calls[i] = bestCalls;
    start[i] = bestStart;
  }

  const groups: number[][] = [];
  for (let end = n; end > 0; end = start[end]!) groups.push(order.slice(start[end]!, end));
  return groups.reverse();
}

/** Useful vs computed tokens of a plan from {@link planSubBatches}. */
export function paddingStats(lengths: readonly number[], groups: readonly (readonly number[])[]): PaddingStats {
  let usefulTokens = 0;
  let paddedTokens = 0;
  for (const group of groups) {
    let maxLen = 0;
    for (const i of group) {
      const len = lengths[i];
      if (len === undefined) throw new RangeError(`group index ${i} is outside lengths (${lengths.length})`);
      usefulTokens += len;
      if (len > maxLen) maxLen = len;
    }
    paddedTokens += group.length * maxLen;
  }
  return { usefulTokens, paddedTokens, usefulFraction: paddedTokens === 0 ? 1 : usefulTokens / paddedTokens };
}
