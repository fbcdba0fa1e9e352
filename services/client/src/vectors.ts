// Byte order of this host; the wire format (VECTOR_ENCODING_FLOAT32_LE) is little-endian.
const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Copies little-endian float32 bytes into a fresh, aligned Float32Array. */
export function decodeFloat32Le(bytes: Uint8Array): Float32Array {
  if (bytes.byteLength % 4 !== 0) throw new RangeError(`float32 bytes: length ${bytes.byteLength} is not a multiple of 4`);
  const out = new Float32Array(bytes.byteLength / 4);
  if (HOST_IS_LITTLE_ENDIAN) {
    new Uint8Array(out.buffer).set(bytes);
  } else {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  }
  return out;
}
