/**
 * L2-normalises each row of a row-major matrix in place. A zero row stays zero (no NaN).
 * @param vectors n × dims values
 * @param dims row length; `vectors.length` must be a multiple of it
 */
export function l2normalize(vectors: Float32Array, dims: number): void {
  if (!(Number.isSafeInteger(dims) && dims >= 1) || vectors.length % dims !== 0) {
    throw new RangeError(`vectors.length ${vectors.length} is not a multiple of dims ${dims}`);
  }
  for (let row = 0; row < vectors.length; row += dims) {
    // Accumulate in float64: float32 sums drift visibly over hundreds of dimensions.
    let sum = 0;
    for (let i = row; i < row + dims; i++) sum += vectors[i]! * vectors[i]!;
    if (sum === 0) continue;
    const scale = 1 / Math.sqrt(sum);
    for (let i = row; i < row + dims; i++) vectors[i] = vectors[i]! * scale;
  }
}
