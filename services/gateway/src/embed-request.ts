import type { EmbedRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel } from "@shoal/common";
import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";

/** Limits a gateway enforces before anything reaches the queue. */
export interface RequestLimits {
  readonly maxInputsPerRequest: number;
  readonly maxInputChars: number;
}

/**
 * Checks an Embed request against the catalog and the gateway's limits; returns the model.
 * Each error names the offending input and the limit, never echoes user text.
 */
export function validateEmbed(
  req: EmbedRequest,
  models: ReadonlyMap<string, CatalogModel>,
  limits: RequestLimits,
): CatalogModel {
  if (req.model === "") throw new InvalidRequestError("model: required");
  const model = models.get(req.model);
  if (!model) throw new ModelNotFoundError(req.model);
  if (model.spec.task !== "embed") {
    throw new InvalidRequestError(`model '${model.id}' is not an embedding model (task ${Task[taskOf(model)]})`);
  }
  if (req.inputs.length === 0) throw new InvalidRequestError("inputs: at least one text is required");
  if (req.inputs.length > limits.maxInputsPerRequest) {
    throw new InvalidRequestError(
      `inputs: ${req.inputs.length} texts exceed the limit of ${limits.maxInputsPerRequest} per request`,
    );
  }
  for (let i = 0; i < req.inputs.length; i++) {
    const text = req.inputs[i] ?? "";
    if (text.trim() === "") throw new InvalidRequestError(`inputs[${i}]: empty text`);
    if (text.length > limits.maxInputChars) {
      throw new InvalidRequestError(
        `inputs[${i}]: ${text.length} characters exceed the limit of ${limits.maxInputChars} characters per input`,
      );
    }
  }
  return model;
}

function taskOf(model: CatalogModel): Task {
  switch (model.spec.task) {
    case "embed":
      return Task.EMBED;
    default:
      return Task.UNSPECIFIED;
  }
}
