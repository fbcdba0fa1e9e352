/**
 * Embedding quantisation on the worker (EmbeddingType): fixed rules, so the same vector always
 * gives the same bytes on every worker, with no calibration set to ship.
 *
 * - int8: `round(v * 127)` (halves away from zero) clamped to [-127, 127], a symmetric fixed range for normalised
 *   vectors (every component lies in [-1, 1]); stored as two's complement bytes.
 * - uint8: `round((v + 1) * 127.5)` clamped to [0, 255]: the same [-1, 1] range mapped onto bytes.
 * - binary / ubinary: sentence-transformers' `quantize_embeddings` (and Cohere's): one bit per
 *   dimension, 1 when v > 0, packed MSB-first into ceil(d / 8) bytes (the last byte padded with
 *   0 bits); ubinary is those bytes, binary is each byte - 128 as a signed byte.
 */
import { EmbeddingType } from "@shoal/gen/shoal/v1/common_pb.ts";

/** Rounds halves away from zero (Math.round takes -63.5 to -63, which would make int8 asymmetric). */
function roundHalfAway(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/** Bytes per vector of each quantised type. */
export function quantizedBytes(type: EmbeddingType, dimensions: number): number {
  return type === EmbeddingType.BINARY || type === EmbeddingType.UBINARY ? Math.ceil(dimensions / 8) : dimensions;
}

/** Signed bytes (two's complement in the returned Uint8Array), one per value. */
export function quantizeInt8(values: Float32Array): Uint8Array {
  const out = new Int8Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = Math.max(-127, Math.min(127, roundHalfAway(values[i]! * 127)));
  return new Uint8Array(out.buffer);
}

export function quantizeUint8(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = Math.max(0, Math.min(255, roundHalfAway((values[i]! + 1) * 127.5)));
  return out;
}

/** Packed sign bits of `rows` vectors of `dimensions` values each, every row starting on a byte. */
export function quantizeUbinary(values: Float32Array, dimensions: number): Uint8Array {
  const rows = dimensions === 0 ? 0 : values.length / dimensions;
  const perRow = Math.ceil(dimensions / 8);
  const out = new Uint8Array(rows * perRow);
  for (let r = 0; r < rows; r++) {
    for (let d = 0; d < dimensions; d++) {
      if (values[r * dimensions + d]! > 0) out[r * perRow + (d >> 3)]! |= 0x80 >> (d & 7);
    }
  }
  return out;
}

/** {@link quantizeUbinary} with each byte shifted by -128, as signed bytes. */
export function quantizeBinary(values: Float32Array, dimensions: number): Uint8Array {
  const out = quantizeUbinary(values, dimensions);
  for (let i = 0; i < out.length; i++) out[i] = (out[i]! - 128) & 0xff;
  return out;
}
