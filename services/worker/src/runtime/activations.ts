/**
 * Logits → scores for rerankers and classifiers, in place over the pool's `[rows, width]`
 * output: a reranker's `scoreActivation`, softmax for single-label classifiers, a sigmoid per
 * logit for multi-label ones (as Hugging Face `problem_type` and sentence-transformers'
 * CrossEncoder apply them).
 */
import type { ModelSpec } from "@shoal/common/model-manifest";

/** What turns a model's output into scores. `none`: used as is (embedders, raw-logit rerankers). */
export type Activation = "sigmoid" | "softmax" | "none";

function checkWidth(values: Float32Array, width: number): void {
  if (!(Number.isSafeInteger(width) && width >= 1) || values.length % width !== 0) {
    throw new RangeError(`${values.length} values are not rows of width ${width}`);
  }
}

/**
 * 1 / (1 + e^-x) of every value, in place, without overflow for large |x|.
 * Row-wise and element-wise are the same thing here: each logit stands alone.
 * @returns `values`
 */
export function sigmoid(values: Float32Array): Float32Array {
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!;
    if (x >= 0) {
      values[i] = 1 / (1 + Math.exp(-x));
    } else {
      const e = Math.exp(x);
      values[i] = e / (1 + e);
    }
  }
  return values;
}

/**
 * Softmax of each row of `width` values, in place. Stable: the row's maximum is subtracted
 * before exponentiating and sums are accumulated in double precision, so large logits neither
 * overflow nor lose the others. A row holding +Infinity shares 1 among its infinite entries;
 * a row of -Infinity only becomes uniform. NaN in a row makes the row NaN.
 * @returns `values`
 * @throws RangeError when `values.length` is not a multiple of `width`
 */
export function softmax(values: Float32Array, width: number): Float32Array {
  checkWidth(values, width);
  for (let start = 0; start < values.length; start += width) {
    const end = start + width;
    let max = -Infinity;
    for (let i = start; i < end; i++) max = Math.max(max, values[i]!);
    if (max === Infinity || max === -Infinity) {
      // Exponentials would be Inf/Inf or 0/0: take the limit instead.
      let count = 0;
      for (let i = start; i < end; i++) if (values[i] === max) count++;
      for (let i = start; i < end; i++) values[i] = values[i] === max ? 1 / count : 0;
      continue;
    }
    let sum = 0;
    for (let i = start; i < end; i++) {
      const e = Math.exp(values[i]! - max);
      values[i] = e;
      sum += e;
    }
    // sum >= 1 (the maximum contributes e^0), unless a NaN made it NaN.
    for (let i = start; i < end; i++) values[i] = values[i]! / sum;
  }
  return values;
}

/**
 * The activation a model's output takes: a reranker's `scoreActivation`; softmax for a
 * `single_label` classifier, sigmoid for `multi_label`; none for an embedder.
 */
export function activationOf(spec: ModelSpec): Activation {
  switch (spec.task) {
    case "rerank":
      return spec.scoreActivation;
    case "classify":
      return spec.problemType === "single_label" ? "softmax" : "sigmoid";
    case "embed":
      return "none";
  }
}

/**
 * Applies {@link activationOf}(spec) in place to pool output of `spec.dimensions` values a row
 * (a reranker: one logit per pair; a classifier: `numLabels` logits per text, in `labels` order).
 * @returns `logits`, now scores
 * @throws RangeError when `logits.length` is not a multiple of `spec.dimensions`
 */
export function applyActivation(spec: ModelSpec, logits: Float32Array): Float32Array {
  checkWidth(logits, spec.dimensions);
  const activation = activationOf(spec);
  if (activation === "sigmoid") return sigmoid(logits);
  if (activation === "softmax") return softmax(logits, spec.dimensions);
  return logits;
}
