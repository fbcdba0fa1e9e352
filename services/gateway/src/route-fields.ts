import { EmbeddingType } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { Embedding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { CatalogModel, ModelTask } from "@shoal/common";
import { float32LeToNumbers, RouteRequestError } from "./http-call.ts";

/**
 * Field readers shared by the Cohere and TEI routes: JSON shapes only (types, required fields).
 * What the values mean (text limits, model task, dimensions, truncation) is checked by the RPC
 * the route calls, once, as for every Connect call.
 */

/** The body as a JSON object, or a refusal. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new RouteRequestError("request body must be a JSON object", "invalid");
  return body as Record<string, unknown>;
}

export function optionalString(b: Record<string, unknown>, field: string): string | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new RouteRequestError(`${field}: expected a string`, "invalid", field);
  return v;
}

export function requiredString(b: Record<string, unknown>, field: string): string {
  const v = optionalString(b, field);
  if (v === undefined) throw new RouteRequestError(`${field}: required string`, "invalid", field);
  return v;
}

export function optionalBool(b: Record<string, unknown>, field: string): boolean | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw new RouteRequestError(`${field}: expected true or false`, "invalid", field);
  return v;
}

/** A positive integer (`min` 1 unless told), or undefined when absent. */
export function optionalInt(b: Record<string, unknown>, field: string, min = 1): number | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw new RouteRequestError(`${field}: expected an integer of at least ${min}`, "invalid", field);
  return v;
}

/** A list of strings (`one` also allows a lone string). */
export function stringList(b: Record<string, unknown>, field: string, one = false): string[] {
  const v = b[field];
  if (one && typeof v === "string") return [v];
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    throw new RouteRequestError(`${field}: expected ${one ? "a string or " : ""}a list of strings`, "invalid", field);
  }
  return v as string[];
}

/**
 * A token cap the caller sets per input (Cohere's `max_tokens`, `max_tokens_per_doc`). Shoal
 * truncates to the model's max sequence length only, so a smaller cap is refused rather than
 * silently exceeded.
 */
export function checkTokenCap(cap: number | undefined, field: string, model: CatalogModel | undefined): void {
  if (cap === undefined || model === undefined || cap >= model.spec.maxSequenceLength) return;
  throw new RouteRequestError(
    `${field}: ${cap} is below model '${model.id}''s limit of ${model.spec.maxSequenceLength} tokens; Shoal truncates at the model's limit only, so leave it unset or at least ${model.spec.maxSequenceLength}`,
    "invalid",
    field,
  );
}

/** The model a route serves when its request names none: `configured`, else the first pinned one of `task`, else the first one. */
export function defaultModel(models: ReadonlyMap<string, CatalogModel>, task: ModelTask, configured?: string): CatalogModel | undefined {
  if (configured !== undefined) {
    const m = models.get(configured);
    if (m === undefined || m.spec.task !== task) throw new Error(`${configured}: not a ${task} model of the catalog`);
    return m;
  }
  const all = [...models.values()].filter((m) => m.spec.task === task);
  return all.find((m) => m.pinned) ?? all[0];
}

/**
 * The default model of `task`, read live: checked once now (a `configured` id that is not a model
 * of the task stops the start), then looked up on each call, so a model added, removed or
 * re-aliased in the registry is what callers get; undefined while none is served.
 */
export function liveDefaultModel(models: ReadonlyMap<string, CatalogModel>, task: ModelTask, configured?: string): () => CatalogModel | undefined {
  defaultModel(models, task, configured);
  return () => {
    try {
      return defaultModel(models, task, configured);
    } catch {
      return undefined; // the configured model was removed since
    }
  };
}

/** Vector type names as Cohere's `embedding_types` spell them. */
export const EMBEDDING_TYPE_NAMES: ReadonlyMap<string, EmbeddingType> = new Map([
  ["float", EmbeddingType.FLOAT],
  ["int8", EmbeddingType.INT8],
  ["uint8", EmbeddingType.UINT8],
  ["binary", EmbeddingType.BINARY],
  ["ubinary", EmbeddingType.UBINARY],
]);

/** One Embedding's vector of `type` as JSON numbers (float: float32_le or values; bytes: signed or unsigned). */
export function vectorOf(e: Embedding, type: EmbeddingType): number[] {
  switch (type) {
    case EmbeddingType.INT8:
      return Array.from(new Int8Array(e.int8.buffer, e.int8.byteOffset, e.int8.byteLength));
    case EmbeddingType.UINT8:
      return Array.from(e.uint8);
    case EmbeddingType.BINARY:
      return Array.from(new Int8Array(e.binary.buffer, e.binary.byteOffset, e.binary.byteLength));
    case EmbeddingType.UBINARY:
      return Array.from(e.ubinary);
    default:
      return e.float32Le.byteLength > 0 ? float32LeToNumbers(e.float32Le) : e.values;
  }
}
