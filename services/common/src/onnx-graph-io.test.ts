import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { getPreset, writeHubModelDir } from "@shoal/models";
import onnxProto from "onnx-proto";
import { ONNX_FLOAT, ONNX_INT64, readOnnxGraphIo } from "./onnx-graph-io.ts";

const { onnx } = onnxProto;

describe("readOnnxGraphIo", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "shoal-onnx-io-test-"));
    await writeHubModelDir(join(dir, "embed"), getPreset("tiny"));
    await writeHubModelDir(join(dir, "classify"), getPreset("tiny-classify"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** The same signature as onnx-proto's generated decoder reads it from the whole file. */
  async function decoded(path: string): Promise<{ inputs: unknown[]; outputs: unknown[] }> {
    const model = onnx.ModelProto.decode(await readFile(path));
    const info = (v: InstanceType<typeof onnx.ValueInfoProto>): unknown => ({
      name: v.name,
      elemType: v.type?.tensorType?.elemType ?? 0,
      shape: v.type?.tensorType?.shape?.dim?.map((d) =>
        d.dimParam ? d.dimParam : d.dimValue === undefined || d.dimValue === null ? undefined : Number(d.dimValue),
      ),
    });
    return {
      inputs: model.graph?.input?.map((v) => info(v as InstanceType<typeof onnx.ValueInfoProto>)) ?? [],
      outputs: model.graph?.output?.map((v) => info(v as InstanceType<typeof onnx.ValueInfoProto>)) ?? [],
    };
  }

  it("reads the inputs and outputs of an encoder graph as onnx-proto decodes them", async () => {
    const path = join(dir, "embed", "onnx", "model.onnx");
    const io = await readOnnxGraphIo(path);
    assert.deepEqual(
      io.inputs.map((i) => [i.name, i.elemType, i.shape]),
      [
        ["input_ids", ONNX_INT64, ["batch_size", "sequence_length"]],
        ["attention_mask", ONNX_INT64, ["batch_size", "sequence_length"]],
        ["token_type_ids", ONNX_INT64, ["batch_size", "sequence_length"]],
      ],
    );
    assert.deepEqual(io.outputs, [{ name: "last_hidden_state", elemType: ONNX_FLOAT, shape: ["batch_size", "sequence_length", 64] }]);
    assert.deepEqual({ inputs: io.inputs, outputs: io.outputs }, await decoded(path));
  });

  it("reads a classifier's logits output [batch, labels]", async () => {
    const io = await readOnnxGraphIo(join(dir, "classify", "onnx", "model.onnx"));
    assert.deepEqual(io.outputs, [{ name: "logits", elemType: ONNX_FLOAT, shape: ["batch_size", 3] }]);
  });

  it("refuses a file that is not an ONNX model, and a truncated one", async () => {
    await writeFile(join(dir, "text.onnx"), "this is not protobuf at all");
    await assert.rejects(readOnnxGraphIo(join(dir, "text.onnx")), Error);
    const bytes = await readFile(join(dir, "embed", "onnx", "model.onnx"));
    await writeFile(join(dir, "cut.onnx"), bytes.subarray(0, bytes.length >> 1));
    await assert.rejects(readOnnxGraphIo(join(dir, "cut.onnx")), /past the end|truncated/);
  });
});
