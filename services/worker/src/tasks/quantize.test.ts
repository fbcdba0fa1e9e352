import assert from "node:assert/strict";
import { test } from "node:test";
import { EmbeddingType } from "@shoal/gen/shoal/v1/common_pb.ts";
import { quantizeBinary, quantizedBytes, quantizeInt8, quantizeUbinary, quantizeUint8 } from "./quantize.ts";

const signed = (b: Uint8Array): number[] => Array.from(new Int8Array(b.buffer, b.byteOffset, b.byteLength));

test("int8: round(v * 127), clamped to [-127, 127]", () => {
  const v = new Float32Array([1, -1, 0, 0.5, -0.5, 0.003, -0.004, 1.5, -2]);
  assert.deepEqual(signed(quantizeInt8(v)), [127, -127, 0, 64, -64, 0, -1, 127, -127]);
});

test("uint8: round((v + 1) * 127.5), clamped to [0, 255]", () => {
  const v = new Float32Array([1, -1, 0, 0.5, -0.5, 2, -3]);
  assert.deepEqual(Array.from(quantizeUint8(v)), [255, 0, 128, 191, 64, 255, 0]);
});

test("ubinary: sign bits packed MSB-first, v > 0 is 1, zero is 0, rows start on a byte", () => {
  // Row 1: 10 dimensions -> 2 bytes; row 2 likewise.
  const row1 = [0.1, -0.2, 0.3, 0, 0.5, 0.6, -0.7, 0.8, 0.9, -1];
  const row2 = [-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, 0.8, -0.9, 1];
  const bytes = quantizeUbinary(new Float32Array([...row1, ...row2]), 10);
  // row1 bits 1010 1101 | 10(000000); row2 bits 0000 0001 | 01(000000)
  assert.deepEqual(Array.from(bytes), [0b10101101, 0b10000000, 0b00000001, 0b01000000]);
});

test("binary: the ubinary bytes minus 128, as signed bytes (sentence-transformers)", () => {
  const v = new Float32Array([0.1, -0.2, 0.3, 0, 0.5, 0.6, -0.7, 0.8, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1]);
  // 0b10101101 = 173 -> 45; 255 -> 127; 0 -> -128
  assert.deepEqual(signed(quantizeBinary(v, 24)), [45, 127, -128]);
});

test("bytes per vector", () => {
  assert.equal(quantizedBytes(EmbeddingType.INT8, 384), 384);
  assert.equal(quantizedBytes(EmbeddingType.UINT8, 384), 384);
  assert.equal(quantizedBytes(EmbeddingType.BINARY, 384), 48);
  assert.equal(quantizedBytes(EmbeddingType.UBINARY, 10), 2);
});
