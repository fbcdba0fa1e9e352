import type { CatalogModel } from "@shoal/common";

function round(n: number): string {
  return String(Number(n.toPrecision(3)));
}

/**
 * How a model's scores are computed, in one line for people (ListModels `scoring`, the console):
 * a cross-encoder's logit and activation, a classifier's softmax or sigmoid, or what a composite
 * computes through its embedder. Empty for embedders (their answer is the vector).
 */
export function describeScoring(m: CatalogModel): string {
  const c = m.composite;
  if (c?.kind === "bi-encoder") {
    return `bi-encoder: cosine in [-1, 1] (no sigmoid) of embeddings by ${c.embedder}, its query prompt on the query, its passage prompt on each document`;
  }
  if (c?.kind === "zero-shot") {
    return `zero-shot: softmax over labels of cosine(text, label description) / ${round(c.temperature)}, ${c.labels.length} label descriptions embedded by ${c.embedder}`;
  }
  switch (m.spec.task) {
    case "rerank":
      return m.spec.scoreActivation === "sigmoid" ? "cross-encoder logit, sigmoid: a score in (0, 1)" : "cross-encoder logit, raw (no activation)";
    case "classify":
      return m.spec.problemType === "single_label"
        ? `sequence classifier: softmax over ${m.spec.numLabels} label logits`
        : `sequence classifier (multi-label): a sigmoid per label logit`;
    default:
      return "";
  }
}
