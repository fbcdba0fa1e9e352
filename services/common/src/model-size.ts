/** Fixed cost of an inference session beyond its weights (arena, tokenizer, thread), bytes. */
export const SESSION_OVERHEAD_BYTES = 16 * 1024 * 1024;

/**
 * One session's resident bytes, estimated from its ONNX file's size: 1.5x the weights (their copy
 * plus activations) and the fixed cost. What a worker counts against its memory budget when the
 * catalog or the manifest gives no size.
 */
export function sessionBytesOfFile(fileBytes: number): number {
  return Math.ceil(fileBytes * 1.5) + SESSION_OVERHEAD_BYTES;
}
