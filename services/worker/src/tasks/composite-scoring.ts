/**
 * The scores of composite models, from their embedder's raw rows (the pool never normalises, so
 * every score here is a true cosine whatever the embedder's `normalize`).
 */
import { softmax } from "../runtime/activations.ts";

/**
 * Cosine of row `a` and row `b` of `rows` (`width` values each), accumulated in double precision.
 * 0 when either row is all zeros (no direction to compare).
 */
export function cosineAt(rows: Float32Array, width: number, a: number, b: number, other: Float32Array = rows): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  const ao = a * width;
  const bo = b * width;
  for (let i = 0; i < width; i++) {
    const x = rows[ao + i]!;
    const y = other[bo + i]!;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/**
 * A bi-encoder's rerank scores: `rows` holds the query's vector, then one per document; the score
 * of document i is cosine(query, document i), in [-1, 1].
 * @returns one score per document, in document order
 */
export function biEncoderScores(rows: Float32Array, width: number): Float32Array {
  const documents = rows.length / width - 1;
  const out = new Float32Array(Math.max(0, documents));
  for (let d = 0; d < documents; d++) out[d] = cosineAt(rows, width, 0, d + 1);
  return out;
}

/**
 * A zero-shot classifier's label scores: per text, softmax over labels of
 * cosine(text, label description) / temperature. Each row of the result sums to 1.
 * @param texts the texts' vectors, `width` values each
 * @param labels the label descriptions' vectors, `width` values each, in label order
 * @returns texts × labels scores, row-major
 */
export function zeroShotScores(texts: Float32Array, labels: Float32Array, width: number, temperature: number): Float32Array {
  if (!(temperature > 0)) throw new RangeError(`temperature must be > 0 (got ${temperature})`);
  const nTexts = texts.length / width;
  const nLabels = labels.length / width;
  const out = new Float32Array(nTexts * nLabels);
  for (let t = 0; t < nTexts; t++) {
    for (let l = 0; l < nLabels; l++) out[t * nLabels + l] = cosineAt(texts, width, t, l, labels) / temperature;
  }
  return softmax(out, nLabels);
}
