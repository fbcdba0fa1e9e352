/** Cosine similarity of every pair of vectors: a symmetric n x n matrix with 1 on the diagonal. */
export function cosineMatrix(vectors: readonly ArrayLike<number>[]): number[][] {
  const norms = vectors.map((v) => {
    let s = 0;
    for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
    return Math.sqrt(s);
  });
  const n = vectors.length;
  const out = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  for (let a = 0; a < n; a++) {
    for (let b = a; b < n; b++) {
      const va = vectors[a]!;
      const vb = vectors[b]!;
      let dot = 0;
      for (let i = 0; i < va.length; i++) dot += va[i]! * (vb[i] ?? 0);
      const denom = norms[a]! * norms[b]!;
      // A vector is exactly itself; rounding would otherwise show 0.99999999.
      const sim = denom === 0 ? 0 : a === b ? 1 : Math.max(-1, Math.min(1, dot / denom));
      out[a]![b] = sim;
      out[b]![a] = sim;
    }
  }
  return out;
}

/**
 * The similarity a matrix's palest warm cell stands for: its lowest off-diagonal value when
 * positive, so small differences between related texts still show (0 otherwise).
 */
export function colorFloor(matrix: readonly (readonly number[])[]): number {
  let lo = 1;
  matrix.forEach((row, i) => {
    row.forEach((v, j) => {
      if (i !== j) lo = Math.min(lo, v);
    });
  });
  return matrix.length < 2 ? 0 : Math.min(0.95, Math.max(0, lo));
}

/**
 * Cell colours for a similarity in [-1, 1]: a diverging scale, blue for opposite, pale at
 * `floor` and below, deepening warm up to 1, with a text colour that stays readable on it.
 */
export function similarityColor(sim: number, floor = 0): { background: string; color: string } {
  const s = Math.max(-1, Math.min(1, sim));
  const hue = s >= 0 ? 18 : 215;
  const strength = s >= 0 ? Math.max(0, (s - floor) / (1 - floor)) : -s;
  const lightness = 96 - strength * 52;
  const saturation = 35 + strength * 55;
  return {
    background: `hsl(${hue} ${saturation.toFixed(0)}% ${lightness.toFixed(0)}%)`,
    color: lightness < 62 ? "#fff" : "#1d1d1f",
  };
}
