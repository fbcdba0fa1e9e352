import type { MessageInitShape } from "@bufbuild/protobuf";
import { bytesToVectors, vectorsToBytes } from "@shoal/common";
import { type EmbeddingSchema, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { EmbeddingType } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobStatus, type EmbedOutput } from "@shoal/gen/shoal/v1/job_pb.ts";
import { JobFailedError } from "./errors.ts";

type EmbeddingInit = MessageInitShape<typeof EmbeddingSchema>;

/** Bytes per vector of a quantised type. */
export function bytesPer(type: EmbeddingType, dims: number): number {
  return type === EmbeddingType.BINARY || type === EmbeddingType.UBINARY ? Math.ceil(dims / 8) : dims;
}

/** Each quantised type's bytes in `out`, with its EmbeddingType and its field name in Embedding. */
export function quantizedParts(out: EmbedOutput) {
  return [
    [EmbeddingType.INT8, out.int8, "int8"],
    [EmbeddingType.UINT8, out.uint8, "uint8"],
    [EmbeddingType.BINARY, out.binary, "binary"],
    [EmbeddingType.UBINARY, out.ubinary, "ubinary"],
  ] as const;
}

/**
 * Checks that `out` holds `count` inputs' results (every part sized for them); returns its float
 * vectors (empty when the job's embedding types left FLOAT out). Internal otherwise.
 */
export function checkEmbedShape(out: EmbedOutput, count: number): Float32Array {
  const dims = out.dimensions;
  const vectors = bytesToVectors(out.vectors);
  const hasFloat = vectors.length > 0;
  const quantized = quantizedParts(out);
  const wrongShape =
    dims === 0 ||
    out.tokenCounts.length !== count ||
    (hasFloat && vectors.length !== dims * count) ||
    (!hasFloat && quantized.every(([, bytes]) => bytes.length === 0)) ||
    quantized.some(([t, bytes]) => bytes.length !== 0 && bytes.length !== bytesPer(t, dims) * count);
  if (wrongShape) throw new JobFailedError(JobStatus.INTERNAL, "worker returned a result of the wrong shape");
  return vectors;
}

/**
 * One Embedding per input from a worker's EmbedOutput: float values (or float32 LE bytes) when
 * the worker computed them, each quantised type's row; Internal when any part has the wrong size.
 */
export function embeddingsOf(out: EmbedOutput, count: number, encoding: VectorEncoding): { embeddings: EmbeddingInit[]; promptTokens: number } {
  const dims = out.dimensions;
  const vectors = checkEmbedShape(out, count);
  // No float bytes: the job's embedding types left FLOAT out.
  const hasFloat = vectors.length > 0;
  const quantized = quantizedParts(out);
  const truncated = new Set(out.truncated);
  const packed = encoding === VectorEncoding.FLOAT32_LE;
  let promptTokens = 0;
  const embeddings = Array.from({ length: count }, (_, i): EmbeddingInit => {
    const tokens = out.tokenCounts[i] ?? 0;
    promptTokens += tokens;
    const e: EmbeddingInit = { index: i, tokens, truncated: truncated.has(i) };
    if (hasFloat) {
      const row = vectors.subarray(i * dims, (i + 1) * dims);
      if (packed) e.float32Le = vectorsToBytes(row);
      else e.values = Array.from(row);
    }
    for (const [t, bytes, field] of quantized) {
      const n = bytesPer(t, dims);
      if (bytes.length > 0) e[field] = bytes.subarray(i * n, (i + 1) * n);
    }
    return e;
  });
  return { embeddings, promptTokens };
}
