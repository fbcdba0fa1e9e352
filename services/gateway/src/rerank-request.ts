import type { RerankRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel } from "@shoal/common";
import { estimateTokens } from "./admission.ts";
import { checkText, checkTexts, requireModel, type RequestLimits } from "./embed-request.ts";

/**
 * Checks a Rerank request against the catalog and the gateway's limits; returns the model.
 * The query and every document are held to the per-input character limit, the document count to
 * the per-request input limit. Errors name the field and the limit, never echo user text.
 * `top_k` needs no check: 0 (or unset) means every document, more than the count means all too.
 */
export function validateRerank(req: RerankRequest, models: ReadonlyMap<string, CatalogModel>, limits: RequestLimits): CatalogModel {
  const model = requireModel(req.model, models, "rerank");
  checkText("query", req.query, limits);
  checkTexts("documents", "document", req.documents, limits);
  return model;
}

/**
 * Admission estimate of a Rerank call: the worker runs one (query, document) pair per document,
 * so the cost is the sum over documents of the pair's estimate (each capped at the model's max
 * sequence length when truncating).
 */
export function estimateRerankTokens(query: string, documents: readonly string[], maxSequenceLength: number, truncate: boolean): number {
  let total = 0;
  // Concatenation only builds a rope (no copy); the estimate reads the length.
  for (const document of documents) total += estimateTokens([query + document], maxSequenceLength, truncate);
  return total;
}
