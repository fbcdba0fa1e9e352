import type { ClassifyRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel } from "@shoal/common";
import { checkTexts, requireModel, type RequestLimits } from "./embed-request.ts";

/**
 * Checks a Classify request against the catalog and the gateway's limits; returns the model.
 * Errors name the offending input and the limit, never echo user text. `top_k` needs no check:
 * 0 (or unset) means every label, more than the label count means all too.
 */
export function validateClassify(req: ClassifyRequest, models: ReadonlyMap<string, CatalogModel>, limits: RequestLimits): CatalogModel {
  const model = requireModel(req.model, models, "classify");
  checkTexts("inputs", "text", req.inputs, limits);
  return model;
}

/** Label names of a classify model, in logit order (empty for other tasks). */
export function labelsOf(model: CatalogModel): readonly string[] {
  return model.spec.task === "classify" ? model.spec.labels : [];
}
