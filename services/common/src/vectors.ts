import { endianness } from "node:os";

// Vectors cross Kafka as raw float32 bytes; the wire order is little-endian and every
// platform Shoal targets (x86-64, arm64) is little-endian, so a view is enough.
if (endianness() !== "LE") throw new Error("Shoal requires a little-endian host");

/** Bytes of a float32 array, without copying. */
export function vectorsToBytes(vectors: Float32Array): Uint8Array {
  return new Uint8Array(vectors.buffer, vectors.byteOffset, vectors.byteLength);
}

/** Float32 view of little-endian bytes (copies only when the bytes are not 4-byte aligned). */
export function bytesToVectors(bytes: Uint8Array): Float32Array {
  checkLength(bytes);
  // new Uint8Array(x) copies even when x is a Buffer (whose slice() would not).
  const aligned = bytes.byteOffset % 4 === 0 ? bytes : new Uint8Array(bytes);
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
}

/** Copies little-endian float32 bytes into a fresh, aligned Float32Array that shares nothing with them. */
export function decodeFloat32Le(bytes: Uint8Array): Float32Array {
  checkLength(bytes);
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

function checkLength(bytes: Uint8Array): void {
  if (bytes.byteLength % 4 !== 0) throw new RangeError(`vector bytes not a multiple of 4: ${bytes.byteLength}`);
}
