/**
 * Frames of the sidecar protocol (services/sidecar-pytorch/PROTOCOL.md): a 4-byte little-endian
 * length, then a blob in the safetensors layout — an 8-byte little-endian header length, a JSON
 * header naming each tensor's dtype, shape and byte range plus a `__metadata__` map of strings,
 * then the tensors' bytes. Tensors are written from their own memory (no copy into a frame
 * buffer) and read as views of the received bytes.
 */

export type TensorDtype = "I32" | "F32";

/** A tensor to send: row-major data and its shape. */
export interface OutTensor {
  readonly shape: readonly number[];
  readonly data: Int32Array | Float32Array;
}

/** A received tensor: its bytes are a view into the frame. */
export interface InTensor {
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly bytes: Buffer;
}

export interface Frame {
  readonly meta: Readonly<Record<string, string>>;
  readonly tensors: ReadonlyMap<string, InTensor>;
}

/** A frame that does not follow the protocol. */
export class FrameError extends Error {
  override readonly name = "FrameError";
}

/** Larger than any reply (1024 × 4096 float32 logits is 16 MiB). */
export const MAX_FRAME_BYTES = 1 << 30;

const ITEM_BYTES: Readonly<Record<string, number>> = { I32: 4, I64: 8, F32: 4, F16: 2, U8: 1 };

/** The frame as chunks to write in order (length prefix and header, then each tensor's bytes). */
export function encodeFrame(meta: Readonly<Record<string, string | number>>, tensors: Readonly<Record<string, OutTensor>> = {}): Buffer[] {
  const header: Record<string, unknown> = { __metadata__: Object.fromEntries(Object.entries(meta).map(([k, v]) => [k, String(v)])) };
  const bodies: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) throw new FrameError(`tensor ${name}: shape [${t.shape.join(", ")}] holds ${count} values, data has ${t.data.length}`);
    const dtype = t.data instanceof Int32Array ? "I32" : "F32";
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
    bodies.push(bytes);
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const head = Buffer.from(json);
  const prefix = Buffer.alloc(12);
  prefix.writeUInt32LE(8 + head.length + offset, 0);
  prefix.writeBigUInt64LE(BigInt(head.length), 4);
  return [prefix, head, ...bodies];
}

/** Decodes one frame's body (what follows its length prefix). */
export function decodeFrame(body: Buffer): Frame {
  if (body.length < 8) throw new FrameError(`frame of ${body.length} bytes is shorter than its header length`);
  const headerLength = Number(body.readBigUInt64LE(0));
  if (8 + headerLength > body.length) throw new FrameError(`header length ${headerLength} exceeds the frame`);
  let header: unknown;
  try {
    header = JSON.parse(body.subarray(8, 8 + headerLength).toString("utf8"));
  } catch (err) {
    throw new FrameError(`frame header is not JSON: ${(err as Error).message}`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw new FrameError("frame header is not an object");
  const data = body.subarray(8 + headerLength);
  const meta: Record<string, string> = {};
  const tensors = new Map<string, InTensor>();
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      for (const [k, v] of Object.entries((info ?? {}) as Record<string, unknown>)) meta[k] = String(v);
      continue;
    }
    const t = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const item = typeof t.dtype === "string" ? ITEM_BYTES[t.dtype] : undefined;
    const shape = Array.isArray(t.shape) && t.shape.every((d) => Number.isSafeInteger(d) && d >= 0) ? (t.shape as number[]) : undefined;
    const range = Array.isArray(t.data_offsets) && t.data_offsets.length === 2 ? (t.data_offsets as number[]) : undefined;
    if (item === undefined || shape === undefined || range === undefined) throw new FrameError(`tensor ${name}: bad dtype, shape or data_offsets`);
    const [start, end] = range as [number, number];
    const count = shape.reduce((a, b) => a * b, 1);
    if (!(start >= 0 && start <= end && end <= data.length && end - start === count * item)) {
      throw new FrameError(`tensor ${name}: byte range ${start}..${end} does not hold [${shape.join(", ")}] ${String(t.dtype)}`);
    }
    tensors.set(name, { dtype: t.dtype as string, shape, bytes: data.subarray(start, end) });
  }
  return { meta, tensors };
}

/** A tensor's values as a fresh, aligned Float32Array. */
export function float32Of(t: InTensor): Float32Array {
  if (t.dtype !== "F32") throw new FrameError(`expected an F32 tensor, got ${t.dtype}`);
  const out = new Float32Array(t.bytes.length / 4);
  Buffer.from(out.buffer).set(t.bytes);
  return out;
}

/** Splits a byte stream into frames; chunks are joined once per frame, not per chunk. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** The frames completed by `chunk`, in order. @throws FrameError on a length out of range */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < 4) return frames;
      const head = this.chunks[0]!.length >= 4 ? this.chunks[0]! : Buffer.concat(this.chunks);
      const length = head.readUInt32LE(0);
      if (length < 8 || length > MAX_FRAME_BYTES) throw new FrameError(`frame length ${length} out of range`);
      if (this.buffered < 4 + length) return frames;
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      frames.push(decodeFrame(all.subarray(4, 4 + length)));
      const rest = all.subarray(4 + length);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
    }
  }
}
