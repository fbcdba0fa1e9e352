/**
 * Reads an ONNX file's graph inputs and outputs (names, element types, shapes) without loading
 * the model: a repository's `onnx/model.onnx` is often 100+ MB of initializers, and all Shoal
 * needs to build a spec is a few hundred bytes of `ValueInfoProto`s.
 *
 * Why not a protobuf library: `onnx-proto` (protobufjs) decodes the whole `ModelProto` from one
 * buffer, so it would read and copy every weight; onnxruntime-node would build a session. This
 * walks the protobuf wire format with positioned reads and seeks past every field it does not
 * need (initializers, nodes' bodies), so it reads kilobytes whatever the file size. The field
 * numbers are onnx.proto's (onnx/onnx, stable since IR version 3); model-manifest tests check
 * the result against `onnx-proto`'s generated decoder.
 */
import { type FileHandle, open } from "node:fs/promises";

/** One graph input or output. */
export interface OnnxValueInfo {
  readonly name: string;
  /** TensorProto.DataType: 1 float32, 7 int64, 6 int32, 10 float16...; 0 when not a tensor. */
  readonly elemType: number;
  /** One entry per axis: a number for a fixed size, the symbol (`batch_size`) or undefined otherwise. */
  readonly shape: readonly (number | string | undefined)[] | undefined;
}

/** A graph's signature: what it takes and what it gives, in the graph's order. */
export interface OnnxGraphIo {
  readonly irVersion: number;
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
}

/** TensorProto.DataType values Shoal checks. */
export const ONNX_INT64 = 7;
export const ONNX_FLOAT = 1;

// onnx.proto field numbers.
const MODEL_IR_VERSION = 1;
const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const TENSOR_NAME = 8;

const CHUNK = 64 * 1024;
/** A ValueInfoProto is a name and a shape: anything this large is a corrupt length. */
const MAX_VALUE_INFO_BYTES = 1 << 20;

/** Buffered, seekable reads over a file handle. */
class Cursor {
  private buf = Buffer.alloc(0);
  private bufStart = 0;
  pos = 0;

  constructor(
    private readonly fh: FileHandle,
    readonly size: number,
  ) {}

  private async fill(n: number): Promise<void> {
    const offset = this.pos - this.bufStart;
    if (offset >= 0 && offset + n <= this.buf.length) return;
    const want = Math.max(n, CHUNK);
    const buf = Buffer.alloc(Math.min(want, this.size - this.pos));
    const { bytesRead } = await this.fh.read(buf, 0, buf.length, this.pos);
    if (bytesRead < n) throw new Error(`truncated at byte ${this.pos}`);
    this.buf = buf.subarray(0, bytesRead);
    this.bufStart = this.pos;
  }

  async byte(): Promise<number> {
    await this.fill(1);
    return this.buf[this.pos++ - this.bufStart]!;
  }

  async varint(): Promise<number> {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = await this.byte();
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return value;
      scale *= 128;
    }
    throw new Error(`bad varint at byte ${this.pos}`);
  }

  async bytes(n: number): Promise<Buffer> {
    await this.fill(n);
    const start = this.pos - this.bufStart;
    this.pos += n;
    return Buffer.from(this.buf.subarray(start, start + n));
  }

  /** Skips the value of a field of `wireType` whose tag was just read. */
  async skip(wireType: number): Promise<void> {
    if (wireType === 0) await this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 5) this.pos += 4;
    else if (wireType === 2) {
      // Read the length first: `this.pos += await ...` would add to the position before the length's own bytes.
      const n = await this.varint();
      this.pos += n;
    } else throw new Error(`unsupported wire type ${wireType} at byte ${this.pos}`);
    if (this.pos > this.size) throw new Error("a field runs past the end of the file");
  }
}

/** Synchronous reads over one small message already in memory. */
class Slice {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}
  get done(): boolean {
    return this.pos >= this.buf.length;
  }
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error("truncated varint");
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return value;
      scale *= 128;
    }
    throw new Error("bad varint");
  }
  /** The next field's number and wire type. */
  tag(): [field: number, wireType: number] {
    const t = this.varint();
    return [Math.floor(t / 8), t & 7];
  }
  sub(): Slice {
    const n = this.varint();
    if (this.pos + n > this.buf.length) throw new Error("truncated message");
    const s = new Slice(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  string(): string {
    return new TextDecoder().decode(this.sub().buf);
  }
  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 5) this.pos += 4;
    else if (wireType === 2) this.sub();
    else throw new Error(`unsupported wire type ${wireType}`);
  }
}

/** Fields of one message, each handled by `on` (which must consume its value) or skipped. */
function fields(s: Slice, on: (field: number, wireType: number) => boolean): void {
  while (!s.done) {
    const [field, wireType] = s.tag();
    if (!on(field, wireType)) s.skip(wireType);
  }
}

/** ValueInfoProto { name = 1; type = 2 } → TypeProto { tensor_type = 1 } → Tensor { elem_type = 1; shape = 2 }. */
function valueInfo(s: Slice): OnnxValueInfo {
  let name = "";
  let elemType = 0;
  let shape: (number | string | undefined)[] | undefined;
  fields(s, (f, w) => {
    if (f === 1 && w === 2) name = s.string();
    else if (f === 2 && w === 2) {
      const type = s.sub();
      fields(type, (tf, tw) => {
        if (tf !== 1 || tw !== 2) return false;
        const tensor = type.sub();
        fields(tensor, (xf, xw) => {
          if (xf === 1 && xw === 0) elemType = tensor.varint();
          else if (xf === 2 && xw === 2) shape = tensorShape(tensor.sub());
          else return false;
          return true;
        });
        return true;
      });
    } else return false;
    return true;
  });
  return { name, elemType, shape };
}

/** TensorShapeProto { repeated Dimension dim = 1 }, Dimension { dim_value = 1; dim_param = 2 }. */
function tensorShape(s: Slice): (number | string | undefined)[] {
  const dims: (number | string | undefined)[] = [];
  fields(s, (f, w) => {
    if (f !== 1 || w !== 2) return false;
    const dim = s.sub();
    let value: number | string | undefined;
    fields(dim, (df, dw) => {
      if (df === 1 && dw === 0) value = dim.varint();
      else if (df === 2 && dw === 2) value = dim.string();
      else return false;
      return true;
    });
    dims.push(value);
    return true;
  });
  return dims;
}

/** An initializer's name (TensorProto field 8), seeking past its data. */
async function initializerName(c: Cursor, end: number): Promise<string> {
  let name = "";
  while (c.pos < end) {
    const tag = await c.varint();
    if (Math.floor(tag / 8) === TENSOR_NAME && (tag & 7) === 2) name = (await c.bytes(await c.varint())).toString("utf8");
    else await c.skip(tag & 7);
  }
  return name;
}

/**
 * Reads the graph inputs and outputs of an ONNX file. Before IR version 4 initializers were also
 * listed as graph inputs; those are dropped, so `inputs` is what a caller must feed.
 * @throws Error when the file is not a readable ONNX protobuf (the message says where)
 */
export async function readOnnxGraphIo(path: string): Promise<OnnxGraphIo> {
  const fh = await open(path, "r");
  try {
    const c = new Cursor(fh, (await fh.stat()).size);
    let irVersion = 0;
    let inputs: OnnxValueInfo[] = [];
    const outputs: OnnxValueInfo[] = [];
    const initializers = new Set<string>();
    let sawGraph = false;
    while (c.pos < c.size) {
      const tag = await c.varint();
      const field = Math.floor(tag / 8);
      if (field === MODEL_IR_VERSION && (tag & 7) === 0) irVersion = await c.varint();
      else if (field === MODEL_GRAPH && (tag & 7) === 2) {
        sawGraph = true;
        const length = await c.varint();
        const end = c.pos + length;
        if (end > c.size) throw new Error("the graph runs past the end of the file");
        while (c.pos < end) {
          const gtag = await c.varint();
          const gfield = Math.floor(gtag / 8);
          if ((gfield === GRAPH_INPUT || gfield === GRAPH_OUTPUT) && (gtag & 7) === 2) {
            const n = await c.varint();
            if (n > MAX_VALUE_INFO_BYTES) throw new Error(`a graph ${gfield === GRAPH_INPUT ? "input" : "output"} of ${n} bytes`);
            (gfield === GRAPH_INPUT ? inputs : outputs).push(valueInfo(new Slice(await c.bytes(n))));
          } else if (gfield === GRAPH_INITIALIZER && (gtag & 7) === 2 && irVersion < 4) {
            const length = await c.varint();
            const tensorEnd = c.pos + length;
            initializers.add(await initializerName(c, tensorEnd));
            c.pos = tensorEnd;
          } else await c.skip(gtag & 7);
        }
      } else await c.skip(tag & 7);
    }
    if (!sawGraph) throw new Error("no graph (not an ONNX model)");
    if (initializers.size > 0) inputs = inputs.filter((i) => !initializers.has(i.name));
    return { irVersion, inputs, outputs };
  } finally {
    await fh.close();
  }
}
