/** Turns a model's token vectors into one vector per sequence, as the manifest's `pooling` says. */
import type { Pooling } from "@shoal/common/model-manifest";

/**
 * Pools one group's output into `out` starting at row `outRow`.
 * - `mean`: average of the token vectors whose mask is 1 (a row with no such token stays zero);
 * - `cls`: the first token's vector;
 * - `lasttoken`: the vector of the last token whose mask is 1. packGroup pads on the right, so
 *   that is the row's last real token; searching the mask instead of assuming a side also gives
 *   the right token for left-padded input (a row with no such token stays zero, as with mean);
 * - `none`: the output is already [batch, dims] and is copied as is.
 * @param hidden [batch, seqLen, dims] (or [batch, dims] for `none`), row-major
 * @param mask batch × seqLen attention mask
 */
export function poolInto(
  out: Float32Array,
  outRow: number,
  hidden: Float32Array,
  mask: BigInt64Array,
  shape: { batch: number; seqLen: number; dims: number },
  pooling: Pooling,
): void {
  const { batch, seqLen, dims } = shape;
  if (pooling === "none") {
    out.set(hidden.subarray(0, batch * dims), outRow * dims);
    return;
  }
  const sum = new Float64Array(dims);
  for (let b = 0; b < batch; b++) {
    const dst = (outRow + b) * dims;
    const src = b * seqLen * dims;
    if (pooling === "cls") {
      out.set(hidden.subarray(src, src + dims), dst);
      continue;
    }
    if (pooling === "lasttoken") {
      let last = seqLen - 1;
      while (last >= 0 && mask[b * seqLen + last] === 0n) last--;
      if (last >= 0) out.set(hidden.subarray(src + last * dims, src + (last + 1) * dims), dst);
      continue;
    }
    sum.fill(0);
    let count = 0;
    for (let s = 0; s < seqLen; s++) {
      if (mask[b * seqLen + s] === 0n) continue;
      count++;
      const tok = src + s * dims;
      for (let d = 0; d < dims; d++) sum[d]! += hidden[tok + d]!;
    }
    if (count === 0) continue;
    for (let d = 0; d < dims; d++) out[dst + d] = sum[d]! / count;
  }
}
