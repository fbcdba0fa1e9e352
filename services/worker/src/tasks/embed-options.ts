/**
 * What an EmbedTask's options mean on the worker: the prompt an input type selects, the side a
 * truncation cuts, the dimensions a Matryoshka model may be cut to, and how the rows become the
 * output (normalise, cut, renormalise, quantise).
 */
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { EmbedOutputSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { EmbedModelSpec, ModelSpec } from "@shoal/common/model-manifest";
import { vectorsToBytes } from "@shoal/common";
import { l2normalize } from "../runtime/l2-normalize.ts";
import { quantizeBinary, quantizeInt8, quantizeUbinary, quantizeUint8 } from "./quantize.ts";
import type { EncodeOptions } from "../runtime/text-tokenizer.ts";

/**
 * The model's prompt for an input type: query and search_query take the query prompt, document
 * and search_document the passage prompt, classification and clustering the query prompt (E5's
 * card: "query: " for symmetric tasks), but only when the model has no separate passage prompt
 * (BGE's instruction is for retrieval queries alone). Undefined: the text goes as sent.
 */
export function promptFor(spec: ModelSpec, inputType: InputType): string | undefined {
  if (spec.task !== "embed") return undefined;
  const { query, passage } = spec.prompts;
  switch (inputType) {
    case InputType.QUERY:
    case InputType.SEARCH_QUERY:
      return query;
    case InputType.DOCUMENT:
    case InputType.SEARCH_DOCUMENT:
      return passage;
    case InputType.CLASSIFICATION:
    case InputType.CLUSTERING:
      return passage === undefined ? undefined : query;
    default:
      return undefined;
  }
}

/** Tokenizer options for a truncation (UNSPECIFIED: the boolean `truncate` decides, END when set). */
export function encodeOptions(truncation: Truncation, truncate: boolean, prompt: string | undefined): EncodeOptions {
  const base = prompt === undefined ? {} : { prompt };
  switch (truncation) {
    case Truncation.NONE:
      return { ...base, truncate: false };
    case Truncation.START:
      return { ...base, truncate: true, from: "start" };
    case Truncation.END:
      return { ...base, truncate: true, from: "end" };
    default:
      return { ...base, truncate, from: "end" };
  }
}

/** Why `dimensions` cannot be served by the model (0: the full vector), or undefined. */
export function dimensionsProblem(spec: EmbedModelSpec, dimensions: number): string | undefined {
  if (dimensions === 0 || dimensions === spec.dimensions) return undefined;
  if (!spec.matryoshka) {
    return `dimensions: model '${spec.id}' was not trained to be truncated (not Matryoshka); only its full ${spec.dimensions} dimensions are served`;
  }
  if (dimensions > spec.dimensions) return `dimensions: ${dimensions} exceeds the ${spec.dimensions} dimensions of model '${spec.id}'`;
  return undefined;
}

/** Keeps the first `keep` of every `width`-wide row. */
function cutRows(rows: Float32Array, width: number, keep: number): Float32Array {
  if (keep === width) return rows;
  const count = rows.length / width;
  const out = new Float32Array(count * keep);
  for (let r = 0; r < count; r++) out.set(rows.subarray(r * width, r * width + keep), r * keep);
  return out;
}

/** The vector part of an EmbedOutput. */
export type EmbedVectors = Pick<MessageInitShape<typeof EmbedOutputSchema>, "dimensions" | "vectors" | "int8" | "uint8" | "binary" | "ubinary">;

/**
 * Rows (inputs × model dimensions) to the output's vectors: L2-normalised when asked, cut to
 * `dimensions` and normalised again (a cut normalised vector is no longer unit length), then each
 * asked type. Quantised types assume normalised values in [-1, 1] (see quantize.ts).
 */
export function shapeVectors(
  rows: Float32Array,
  width: number,
  opts: { readonly normalize: boolean; readonly dimensions: number; readonly types: readonly EmbeddingType[] },
): EmbedVectors {
  if (opts.normalize) l2normalize(rows, width);
  const dims = opts.dimensions === 0 ? width : opts.dimensions;
  const cut = cutRows(rows, width, dims);
  if (dims !== width && opts.normalize) l2normalize(cut, dims);
  const types = new Set(opts.types.length === 0 ? [EmbeddingType.FLOAT] : opts.types);
  const hasFloat = types.has(EmbeddingType.FLOAT);
  return {
    dimensions: dims,
    vectors: hasFloat ? vectorsToBytes(cut) : new Uint8Array(0),
    int8: types.has(EmbeddingType.INT8) ? quantizeInt8(cut) : new Uint8Array(0),
    uint8: types.has(EmbeddingType.UINT8) ? quantizeUint8(cut) : new Uint8Array(0),
    binary: types.has(EmbeddingType.BINARY) ? quantizeBinary(cut, dims) : new Uint8Array(0),
    ubinary: types.has(EmbeddingType.UBINARY) ? quantizeUbinary(cut, dims) : new Uint8Array(0),
  };
}
