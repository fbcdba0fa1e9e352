import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decodeFrame, encodeFrame, float32Of, FrameError, FrameReader } from "./frames.ts";

describe("sidecar frames", () => {
  const ids = new Int32Array([101, 7592, 102, 0, 101, 2088, 2003, 102]);
  const out = new Float32Array([0.5, -1.25, 3e-7]);

  test("round-trip metadata and tensors in the safetensors layout, data 8-byte aligned", () => {
    const chunks = encodeFrame({ op: "run", groups: 1, id: "7" }, { "g0.ids": { shape: [2, 4], data: ids }, output: { shape: [1, 3], data: out } });
    const all = Buffer.concat(chunks);
    assert.equal(all.readUInt32LE(0), all.length - 4);
    const headerLength = Number(all.readBigUInt64LE(4));
    assert.equal(headerLength % 8, 0);
    const frame = decodeFrame(all.subarray(4));
    assert.deepEqual(frame.meta, { op: "run", groups: "1", id: "7" });
    const t = frame.tensors.get("g0.ids")!;
    assert.equal(t.dtype, "I32");
    assert.deepEqual(t.shape, [2, 4]);
    assert.deepEqual(new Int32Array(Uint8Array.from(t.bytes).buffer), ids);
    assert.deepEqual(float32Of(frame.tensors.get("output")!), out);
  });

  test("the reader splits a stream cut anywhere into whole frames", () => {
    const a = Buffer.concat(encodeFrame({ op: "ping", id: "1" }));
    const b = Buffer.concat(encodeFrame({ op: "result", id: "2" }, { output: { shape: [3], data: out } }));
    const stream = Buffer.concat([a, b]);
    for (const cut of [1, 3, 5, 13, a.length, a.length + 2, stream.length - 1]) {
      const reader = new FrameReader();
      const frames = [...reader.push(stream.subarray(0, cut)), ...reader.push(stream.subarray(cut))];
      assert.deepEqual(
        frames.map((f) => f.meta["id"]),
        ["1", "2"],
        `cut at ${cut}`,
      );
      assert.deepEqual(float32Of(frames[1]!.tensors.get("output")!), out);
    }
  });

  test("refuses malformed frames with FrameError", () => {
    const good = Buffer.concat(encodeFrame({ id: "1" }, { x: { shape: [3], data: out } })).subarray(4);
    const badRange = Buffer.from(good.toString("latin1").replace('"data_offsets":[0,12]', '"data_offsets":[0,16]'), "latin1");
    assert.throws(() => decodeFrame(badRange), FrameError);
    assert.throws(() => decodeFrame(Buffer.alloc(4)), FrameError);
    assert.throws(() => new FrameReader().push(Buffer.from([0xff, 0xff, 0xff, 0x7f])), FrameError);
    assert.throws(() => encodeFrame({}, { x: { shape: [2, 2], data: out } }), FrameError);
  });
});
