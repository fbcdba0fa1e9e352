/**
 * Deterministic pseudo-random numbers for model weights.
 *
 * mulberry32 gives uint32 -> [0, 1) floats; Box-Muller turns pairs of them into standard normals.
 * Only IEEE double arithmetic plus V8's fdlibm-derived Math.log/Math.cos/Math.sin is used, so
 * the stream is identical on every platform that runs the same Node major version.
 */

/** A uniform [0, 1) generator seeded with a 32-bit integer (mulberry32). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** 32-bit FNV-1a hash of a string (UTF-16 code units), used to derive per-tensor seeds. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The seed for one named tensor: independent of how many other tensors exist or their order. */
export function tensorSeed(modelSeed: number, tensorName: string): number {
  return (fnv1a32(tensorName) ^ Math.imul(modelSeed >>> 0, 0x9e3779b1)) >>> 0;
}

/** Fills `out` with N(0, std^2) samples (Box-Muller, both values of each pair used). */
export function fillNormal(out: Float32Array, std: number, seed: number): Float32Array {
  const uniform = mulberry32(seed);
  const n = out.length;
  let i = 0;
  while (i < n) {
    // 1 - u is in (0, 1], so log never sees 0.
    const u1 = 1 - uniform();
    const u2 = uniform();
    const r = Math.sqrt(-2 * Math.log(u1)) * std;
    const theta = 2 * Math.PI * u2;
    out[i++] = r * Math.cos(theta);
    if (i < n) out[i++] = r * Math.sin(theta);
  }
  return out;
}
