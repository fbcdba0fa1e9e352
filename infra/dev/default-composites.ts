/**
 * The default fleet's reranker and classifier (issue #48 item 4): no reachable registry ships a
 * real cross-encoder or text classifier, so `npm start` ranks and classifies through a real
 * embedder (services/common/src/composite-model.ts): a bi-encoder ranker, and a zero-shot
 * classifier of support tickets whose labels are described here. `npm run bench:quality`
 * measures both on e2e/bench/quality-set.json, beside the generated models they replace.
 */

/** The embedder both score through: bge-small-en-v1.5 (fp32), with its query instruction for rerank queries. */
export const DEFAULT_COMPOSITE_EMBEDDER = "bge-small-en-v1.5";

/** A support-ticket intent per label: what a text of that label is about (embedded once per load). */
export const SUPPORT_INTENT_LABELS: Readonly<Record<string, string>> = {
  billing: "a question or complaint about an invoice, a charge, a payment, a price or a refund",
  shipping: "a question about a delivery, a parcel, shipping, tracking or an order that has not arrived",
  technical: "a report that the app or website is broken, crashes, shows an error or does not work",
  account: "a problem with logging in, a password, an account, a username or account settings",
  praise: "positive feedback: the customer is happy, thankful or loves the product",
};

/** Catalog entries (JSON is YAML) of the default reranker and classifier: `bge-small-ranker` and `support-intent`. */
export function defaultComposites(): { id: string; [field: string]: unknown }[] {
  const embedder = DEFAULT_COMPOSITE_EMBEDDER;
  return [
    { id: "bge-small-ranker", biEncoder: { embedder } },
    { id: "support-intent", zeroShot: { embedder, temperature: 0.05, labels: SUPPORT_INTENT_LABELS } },
  ];
}
