/**
 * `npm run bench:encode` — what encoding and decoding an EmbedResponse costs on the gateway's
 * CPU, per encoding clients can ask for (issue #17): `values` (repeated float, the default), and
 * `float32_le` (bytes). Connect binary and gRPC write the message with @bufbuild/protobuf's
 * toBinary; clients read it with fromBinary. Prints µs per message after a warm-up.
 *
 * Env: BENCH_DIMENSIONS (384), BENCH_ITERATIONS (20000).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { EmbeddingSchema, EmbedResponseSchema } from "@shoal/gen/shoal/v1/inference_pb.ts";

const DIMENSIONS = Number(process.env["BENCH_DIMENSIONS"] ?? 384);
const ITERATIONS = Number(process.env["BENCH_ITERATIONS"] ?? 20_000);

function timeUs(fn: () => void): number {
  for (let i = 0; i < ITERATIONS / 4; i++) fn();
  const t = performance.now();
  for (let i = 0; i < ITERATIONS; i++) fn();
  return ((performance.now() - t) * 1000) / ITERATIONS;
}

const row = Float32Array.from({ length: DIMENSIONS }, (_, i) => Math.sin(i));
console.log(`EmbedResponse of ${DIMENSIONS}-dimension vectors, @bufbuild/protobuf, ${ITERATIONS} iterations each`);
console.log("| vectors | encoding | bytes | toBinary µs | fromBinary µs |");
console.log("| --- | --- | --- | --- | --- |");
for (const vectors of [1, 8]) {
  const asValues = create(EmbedResponseSchema, {
    embeddings: Array.from({ length: vectors }, () => create(EmbeddingSchema, { values: Array.from(row) })),
  });
  const asBytes = create(EmbedResponseSchema, {
    embeddings: Array.from({ length: vectors }, () => create(EmbeddingSchema, { float32Le: new Uint8Array(row.buffer.slice(0)) })),
  });
  for (const [name, msg] of [
    ["values (repeated float)", asValues],
    ["float32_le", asBytes],
  ] as const) {
    const bin = toBinary(EmbedResponseSchema, msg);
    const enc = timeUs(() => toBinary(EmbedResponseSchema, msg));
    const dec = timeUs(() => fromBinary(EmbedResponseSchema, bin));
    console.log(`| ${vectors} | ${name} | ${bin.length} | ${enc.toFixed(1)} | ${dec.toFixed(1)} |`);
  }
}
