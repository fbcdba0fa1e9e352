/**
 * Outputs of a simulated model: the right shape, deterministic in the token ids (the same text
 * gives the same vector on every worker and every run), so answers flow through the whole path
 * unchanged. Not a model: similar texts do not get similar vectors.
 */

/** FNV-1a over a sequence's ids (and token types), as a 32-bit seed. */
function seedOf(ids: ArrayLike<number>, typeIds: ArrayLike<number> | undefined): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < ids.length; i++) {
    h ^= ids[i]! + (typeIds?.[i] ?? 0) * 0x10000;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Writes one row of `dims` values in [-1, 1) from the seed (mulberry32 steps). */
function fillRow(out: Float32Array, offset: number, dims: number, seed: number): void {
  let a = seed;
  for (let d = 0; d < dims; d++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[offset + d] = (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1;
  }
}

/**
 * Rows for every sequence of every group, in order. Embeddings come L2-normalised (the runner's
 * own normalisation leaves them so); rerank and classify rows are logits in [-4, 4).
 */
export function syntheticRows(
  groups: readonly { readonly ids: readonly ArrayLike<number>[]; readonly typeIds?: readonly ArrayLike<number>[] }[],
  dims: number,
  task: "embed" | "rerank" | "classify",
): Float32Array {
  const rows = groups.reduce((n, g) => n + g.ids.length, 0);
  const out = new Float32Array(rows * dims);
  let row = 0;
  for (const g of groups) {
    for (const [i, ids] of g.ids.entries()) {
      const offset = row * dims;
      fillRow(out, offset, dims, seedOf(ids, g.typeIds?.[i]));
      if (task === "embed") {
        let norm = 0;
        for (let d = 0; d < dims; d++) norm += out[offset + d]! ** 2;
        const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
        for (let d = 0; d < dims; d++) out[offset + d]! *= scale;
      } else {
        for (let d = 0; d < dims; d++) out[offset + d]! *= 4;
      }
      row += 1;
    }
  }
  return out;
}
