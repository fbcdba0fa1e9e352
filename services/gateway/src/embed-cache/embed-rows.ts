/**
 * One input's share of a worker's EmbedOutput, and back: what the embedding cache stores per text.
 * Rows own their bytes (copied out of the job's output), so a cached row never keeps a whole
 * result buffer alive and its size is what {@link rowBytes} says.
 */
import { create } from "@bufbuild/protobuf";
import { vectorsToBytes } from "@shoal/common";
import { type EmbedOutput, EmbedOutputSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { bytesPer, checkEmbedShape, quantizedParts } from "../embed-results.ts";

/** One input's result: its vector(s) as the worker computed them, its token count and truncation. */
export interface EmbedRow {
  readonly dimensions: number;
  readonly maxSequenceLength: number;
  /** Tokens of the input after truncation, as the worker counted them. */
  readonly tokens: number;
  readonly truncated: boolean;
  /** Absent when the job's embedding types left FLOAT out. */
  readonly vector: Float32Array | undefined;
  readonly int8: Uint8Array | undefined;
  readonly uint8: Uint8Array | undefined;
  readonly binary: Uint8Array | undefined;
  readonly ubinary: Uint8Array | undefined;
}

/** Bytes a row holds: its vectors' bytes and a fixed allowance for the object and its fields. */
export function rowBytes(row: EmbedRow): number {
  const parts = [row.vector, row.int8, row.uint8, row.binary, row.ubinary];
  return 120 + parts.reduce((n, p) => n + (p?.byteLength ?? 0), 0);
}

/** Splits a worker's output for `count` inputs into one row per input (Internal when its shape is wrong). */
export function rowsOf(out: EmbedOutput, count: number): EmbedRow[] {
  const vectors = checkEmbedShape(out, count);
  const dims = out.dimensions;
  const truncated = new Set(out.truncated);
  const parts = new Map(quantizedParts(out).map(([t, bytes, field]) => [field, { bytes, n: bytesPer(t, dims) }]));
  const cut = (field: "int8" | "uint8" | "binary" | "ubinary", i: number): Uint8Array | undefined => {
    const p = parts.get(field);
    // slice(): a copy, not a view of the whole result.
    return p === undefined || p.bytes.length === 0 ? undefined : p.bytes.slice(i * p.n, (i + 1) * p.n);
  };
  return Array.from({ length: count }, (_, i) => ({
    dimensions: dims,
    maxSequenceLength: out.maxSequenceLength,
    tokens: out.tokenCounts[i] ?? 0,
    truncated: truncated.has(i),
    vector: vectors.length === 0 ? undefined : vectors.slice(i * dims, (i + 1) * dims),
    int8: cut("int8", i),
    uint8: cut("uint8", i),
    binary: cut("binary", i),
    ubinary: cut("ubinary", i),
  }));
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** The EmbedOutput a worker would have sent for these rows in this order (rows of one model and one set of options). */
export function outputOf(rows: readonly EmbedRow[]): EmbedOutput {
  const first = rows[0];
  const join = (pick: (r: EmbedRow) => Uint8Array | undefined): Uint8Array => {
    const parts = rows.map(pick);
    return parts.every((p) => p !== undefined) ? concat(parts) : new Uint8Array(0);
  };
  return create(EmbedOutputSchema, {
    dimensions: first?.dimensions ?? 0,
    maxSequenceLength: first?.maxSequenceLength ?? 0,
    vectors: join((r) => (r.vector === undefined ? undefined : vectorsToBytes(r.vector))),
    tokenCounts: rows.map((r) => r.tokens),
    truncated: rows.flatMap((r, i) => (r.truncated ? [i] : [])),
    int8: join((r) => r.int8),
    uint8: join((r) => r.uint8),
    binary: join((r) => r.binary),
    ubinary: join((r) => r.ubinary),
  });
}
