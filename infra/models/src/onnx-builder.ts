/**
 * A small helper for writing ONNX models with the `onnx-proto` (protobufjs) classes:
 * add initializers and nodes by name, declare graph inputs/outputs, encode to bytes.
 */
import onnxProto from "onnx-proto";
import type { onnx as OnnxTypes } from "onnx-proto";

export const onnx = onnxProto.onnx;
export const DataType = onnx.TensorProto.DataType;
export type DataTypeValue = OnnxTypes.TensorProto.DataType;

/** A dimension: a fixed size or a symbolic (dynamic) name such as "batch_size". */
export type Dim = number | string;

export type AttributeValue = number | string | readonly number[] | { float: number };

export interface ModelOptions {
  irVersion: number;
  opsetVersion: number;
  producerName: string;
  producerVersion: string;
  docString?: string;
  metadata?: Record<string, string>;
}

function valueInfo(name: string, elemType: DataTypeValue, dims: readonly Dim[]): OnnxTypes.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function attribute(name: string, value: AttributeValue): OnnxTypes.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof value === "string") return { name, type: T.STRING, s: new TextEncoder().encode(value) };
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new Error(`attribute ${name}: use { float } for non-integers`);
    return { name, type: T.INT, i: value };
  }
  if ("float" in value) return { name, type: T.FLOAT, f: value.float };
  return { name, type: T.INTS, ints: [...value] };
}

function bytesOf(data: Float32Array | BigInt64Array): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

export class GraphBuilder {
  private readonly nodes: OnnxTypes.INodeProto[] = [];
  private readonly initializers: OnnxTypes.ITensorProto[] = [];
  private readonly inputs: OnnxTypes.IValueInfoProto[] = [];
  private readonly outputs: OnnxTypes.IValueInfoProto[] = [];
  private readonly names = new Set<string>();
  private readonly constCache = new Map<string, string>();
  /** Bytes of initializer payloads added so far. */
  weightBytes = 0;

  constructor(private readonly graphName: string) {}

  private claim(name: string): string {
    if (this.names.has(name)) throw new Error(`duplicate tensor name ${name}`);
    this.names.add(name);
    return name;
  }

  input(name: string, elemType: DataTypeValue, dims: readonly Dim[]): string {
    this.inputs.push(valueInfo(this.claim(name), elemType, dims));
    return name;
  }

  output(name: string, elemType: DataTypeValue, dims: readonly Dim[]): void {
    if (!this.names.has(name)) throw new Error(`graph output ${name} is not produced by any node`);
    this.outputs.push(valueInfo(name, elemType, dims));
  }

  /** Adds a float32 initializer (little-endian raw data). */
  floatTensor(name: string, dims: readonly number[], data: Float32Array): string {
    return this.rawTensor(name, DataType.FLOAT, dims, data);
  }

  int64Tensor(name: string, dims: readonly number[], values: readonly number[]): string {
    return this.rawTensor(
      name,
      DataType.INT64,
      dims,
      BigInt64Array.from(values, (v) => BigInt(v)),
    );
  }

  private rawTensor(name: string, dataType: DataTypeValue, dims: readonly number[], data: Float32Array | BigInt64Array): string {
    const count = dims.reduce((a, b) => a * b, 1);
    if (count !== data.length) throw new Error(`initializer ${name}: dims ${dims.join("x")} != ${data.length} values`);
    this.initializers.push({ name: this.claim(name), dataType, dims: [...dims], rawData: bytesOf(data) });
    this.weightBytes += data.byteLength;
    return name;
  }

  /** A shared scalar/1-D constant initializer (deduplicated by value). */
  constFloat(value: number, dims: readonly number[] = []): string {
    const key = `f:${value}:${dims.join(",")}`;
    const hit = this.constCache.get(key);
    if (hit !== undefined) return hit;
    const count = dims.reduce((a, b) => a * b, 1);
    const name = this.floatTensor(`const_f_${this.constCache.size}`, dims, new Float32Array(count).fill(value));
    this.constCache.set(key, name);
    return name;
  }

  constInt64(values: readonly number[], dims: readonly number[] = [values.length]): string {
    const key = `i:${values.join(",")}:${dims.join(",")}`;
    const hit = this.constCache.get(key);
    if (hit !== undefined) return hit;
    const name = this.int64Tensor(`const_i_${this.constCache.size}`, dims, values);
    this.constCache.set(key, name);
    return name;
  }

  /**
   * Adds a node. `output` names its (single) output; by default it is derived from `name`.
   * Returns the output name.
   */
  node(opType: string, inputs: readonly string[], name: string, attrs: Record<string, AttributeValue> = {}, output?: string): string {
    for (const i of inputs) {
      if (i !== "" && !this.names.has(i)) throw new Error(`node ${name}: unknown input ${i}`);
    }
    const out = this.claim(output ?? `${name}_output_0`);
    this.nodes.push({
      name,
      opType,
      input: [...inputs],
      output: [out],
      attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)),
    });
    return out;
  }

  get nodeCount(): number {
    return this.nodes.length;
  }

  toModel(options: ModelOptions): OnnxTypes.ModelProto {
    return onnx.ModelProto.create({
      irVersion: options.irVersion,
      producerName: options.producerName,
      producerVersion: options.producerVersion,
      docString: options.docString ?? "",
      opsetImport: [{ domain: "", version: options.opsetVersion }],
      metadataProps: Object.entries(options.metadata ?? {}).map(([key, value]) => ({ key, value })),
      graph: {
        name: this.graphName,
        node: this.nodes,
        initializer: this.initializers,
        input: this.inputs,
        output: this.outputs,
      },
    });
  }

  encode(options: ModelOptions): Uint8Array {
    return onnx.ModelProto.encode(this.toModel(options)).finish();
  }
}
