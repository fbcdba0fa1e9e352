/**
 * Gateway checks of EmbedOptions and TokenizeRequest options against the catalog, before a job is
 * queued: the worker checks again (a forged record must not bypass them), but a caller learns of
 * a bad option without waiting for the queue.
 */
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { EmbedOptions } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel } from "@shoal/common";
import { InvalidRequestError } from "./errors.ts";

/** Input types by the names the HTTP routes take (OpenAI extension `input_type`, Cohere's names). */
export const INPUT_TYPE_NAMES: ReadonlyMap<string, InputType> = new Map([
  ["query", InputType.QUERY],
  ["document", InputType.DOCUMENT],
  ["search_query", InputType.SEARCH_QUERY],
  ["search_document", InputType.SEARCH_DOCUMENT],
  ["classification", InputType.CLASSIFICATION],
  ["clustering", InputType.CLUSTERING],
]);

/** Values of a proto enum (TS numeric enums map names to numbers and back). */
function enumValues(e: Record<string, string | number>): Set<number> {
  return new Set(Object.values(e).filter((v): v is number => typeof v === "number"));
}

const INPUT_TYPES = enumValues(InputType);
const TRUNCATIONS = enumValues(Truncation);
const EMBEDDING_TYPES = enumValues(EmbeddingType);

/** InvalidArgument for an enum value this gateway does not know (proto3 enums are open). */
export function checkInputType(value: InputType, field = "options.input_type"): void {
  if (!INPUT_TYPES.has(value)) throw new InvalidRequestError(`${field}: unknown value ${value}`);
}

export function checkTruncation(value: Truncation, field = "options.truncation"): void {
  if (!TRUNCATIONS.has(value)) throw new InvalidRequestError(`${field}: unknown value ${value}`);
}

/**
 * Checks an Embed call's options for `model`: known enum values, embedding types given at most
 * once and never UNSPECIFIED, `dimensions` only for Matryoshka models and within 1..their size.
 */
export function checkEmbedOptions(options: EmbedOptions | undefined, model: CatalogModel): void {
  if (options === undefined) return;
  checkInputType(options.inputType);
  checkTruncation(options.truncation);
  const seen = new Set<EmbeddingType>();
  for (const [i, t] of options.embeddingTypes.entries()) {
    if (t === EmbeddingType.UNSPECIFIED || !EMBEDDING_TYPES.has(t)) throw new InvalidRequestError(`options.embedding_types[${i}]: unknown value ${t}`);
    if (seen.has(t)) throw new InvalidRequestError(`options.embedding_types[${i}]: ${EmbeddingType[t]} is listed twice`);
    seen.add(t);
  }
  if (options.dimensions !== undefined) checkDimensions(options.dimensions, model, "options.dimensions");
}

/** `dimensions` for `model`: the full size always; fewer only for a Matryoshka model, at least 1. */
export function checkDimensions(dimensions: number, model: CatalogModel, field: string): void {
  const spec = model.spec;
  if (dimensions === spec.dimensions) return;
  if (dimensions < 1 || dimensions > spec.dimensions) {
    throw new InvalidRequestError(`${field}: ${dimensions} is out of range; model '${model.id}' gives 1..${spec.dimensions} dimensions`);
  }
  if (!(spec.task === "embed" && spec.matryoshka)) {
    throw new InvalidRequestError(
      `${field}: model '${model.id}' was not trained to be truncated (not Matryoshka); only its full ${spec.dimensions} dimensions are served`,
    );
  }
}
