import type { EmbedRequest, TokenizeRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel, ModelTask } from "@shoal/common";
import { checkEmbedOptions, checkInputType, checkTruncation } from "./embed-options.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";

/** Limits a gateway enforces before anything reaches the queue. */
export interface RequestLimits {
  readonly maxInputsPerRequest: number;
  readonly maxInputChars: number;
}

/** How messages name a task's models, and the RPC that serves them. */
const TASKS: Record<ModelTask, { readonly noun: string; readonly rpc: string }> = {
  embed: { noun: "an embedding model", rpc: "Embed" },
  rerank: { noun: "a rerank model", rpc: "Rerank" },
  classify: { noun: "a classification model", rpc: "Classify" },
};

/**
 * The catalog model a request names, checked to serve `task`: InvalidArgument when the id is
 * empty or the model's task is another one (naming the RPC to call instead), NotFound when the
 * catalog lacks it.
 */
export function requireModel(id: string, models: ReadonlyMap<string, CatalogModel>, task: ModelTask): CatalogModel {
  if (id === "") throw new InvalidRequestError("model: required");
  const model = models.get(id);
  if (!model) throw new ModelNotFoundError(id);
  if (model.spec.task !== task) {
    const actual = TASKS[model.spec.task] ?? { noun: `a ${model.spec.task} model`, rpc: "ModelService.ListModels" };
    throw new InvalidRequestError(`model '${model.id}' is ${actual.noun}, not ${TASKS[task].noun}; call ${actual.rpc}`);
  }
  return model;
}

/**
 * Checks one text field: non-empty (not just whitespace) and at most `maxInputChars` characters.
 * `field` names it in the message (`query`, `inputs[3]`); the text itself is never echoed.
 */
export function checkText(field: string, text: string, limits: RequestLimits): void {
  if (text.trim() === "") throw new InvalidRequestError(`${field}: empty text`);
  if (text.length > limits.maxInputChars) {
    throw new InvalidRequestError(`${field}: ${text.length} characters exceed the limit of ${limits.maxInputChars} characters per input`);
  }
}

/**
 * Checks a repeated text field: at least one entry, at most `maxInputsPerRequest`, each one as
 * {@link checkText} says. `noun` is what one entry is called ("text", "document").
 */
export function checkTexts(field: string, noun: string, texts: readonly string[], limits: RequestLimits): void {
  if (texts.length === 0) throw new InvalidRequestError(`${field}: at least one ${noun} is required`);
  if (texts.length > limits.maxInputsPerRequest) {
    throw new InvalidRequestError(`${field}: ${texts.length} ${noun}s exceed the limit of ${limits.maxInputsPerRequest} per request`);
  }
  for (let i = 0; i < texts.length; i++) checkText(`${field}[${i}]`, texts[i] ?? "", limits);
}

/**
 * Checks an Embed request against the catalog and the gateway's limits; returns the model.
 * Each error names the offending input and the limit, never echoes user text.
 */
export function validateEmbed(req: EmbedRequest, models: ReadonlyMap<string, CatalogModel>, limits: RequestLimits): CatalogModel {
  const model = requireModel(req.model, models, "embed");
  checkTexts("inputs", "text", req.inputs, limits);
  checkEmbedOptions(req.options, model);
  return model;
}

/** Checks a Tokenize request: a model of any task, texts as Embed takes them, known options. */
export function validateTokenize(req: TokenizeRequest, models: ReadonlyMap<string, CatalogModel>, limits: RequestLimits): CatalogModel {
  if (req.model === "") throw new InvalidRequestError("model: required");
  const model = models.get(req.model);
  if (!model) throw new ModelNotFoundError(req.model);
  checkTexts("inputs", "text", req.inputs, limits);
  checkInputType(req.inputType, "input_type");
  checkTruncation(req.truncation, "truncation");
  return model;
}
