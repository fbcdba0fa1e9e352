import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema, JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { decodeEnvelope, decodeResult, encodeEnvelope, encodeResult, RecordDecodeError } from "./codec.ts";
import { bytesToVectors, vectorsToBytes } from "./vectors.ts";

test("an envelope survives the round trip with every field", () => {
  const envelope = create(JobEnvelopeSchema, {
    jobId: "0b5f8a4e-2d7c-4c1e-9a55-3f1f0e7a9b10",
    model: "m",
    deadlineUnixMs: 1_800_000_000_123n,
    enqueuedUnixMs: 1_800_000_000_000n,
    replyTo: { topic: "shoal.replies.gw-1", partition: 0 },
    attempt: 1,
    lane: Lane.BATCH,
    tenant: "acme",
    task: { case: "embed", value: { inputs: ["a", "bé", "漢字"], normalize: true, truncate: false } },
  });
  const back = decodeEnvelope(encodeEnvelope(envelope));
  assert.equal(back.jobId, envelope.jobId);
  assert.equal(back.deadlineUnixMs, 1_800_000_000_123n);
  assert.equal(back.lane, Lane.BATCH);
  assert.equal(back.replyTo?.topic, "shoal.replies.gw-1");
  assert.equal(back.task.case, "embed");
  assert.deepEqual(back.task.value?.inputs, ["a", "bé", "漢字"]);
});

test("garbage, empty records and envelopes without id or reply topic are RecordDecodeError", () => {
  for (const bytes of [null, new Uint8Array(0), new Uint8Array([0xff, 0xff, 0xff]), new TextEncoder().encode("hello")]) {
    assert.throws(() => decodeEnvelope(bytes), RecordDecodeError);
  }
  const noReply = encodeEnvelope(create(JobEnvelopeSchema, { jobId: "x" }));
  assert.throws(() => decodeEnvelope(noReply), /missing reply_to/);
  const noId = encodeEnvelope(create(JobEnvelopeSchema, { replyTo: { topic: "t" } }));
  assert.throws(() => decodeEnvelope(noId), /missing job_id/);
  // Results may only go to a reply topic, by a legal name and partition.
  for (const replyTo of [
    { topic: "shoal.jobs.default.interactive" },
    { topic: "shoal.replies.gw 1" },
    { topic: "shoal.replies." },
    { topic: `shoal.replies.${"x".repeat(240)}` },
    { topic: "shoal.replies.gw-1", partition: -1 },
  ]) {
    assert.throws(
      () => decodeEnvelope(encodeEnvelope(create(JobEnvelopeSchema, { jobId: "x", replyTo }))),
      /reply_to is not a reply topic/,
      JSON.stringify(replyTo),
    );
  }
});

test("a result carries vectors as packed little-endian float32", () => {
  const vectors = new Float32Array([0.5, -1.25, 3e-8, 1e30]);
  const result = create(JobResultSchema, {
    jobId: "j",
    status: JobStatus.OK,
    output: { case: "embed", value: { dimensions: 2, vectors: vectorsToBytes(vectors), tokenCounts: [3, 4] } },
  });
  const back = decodeResult(encodeResult(result));
  assert.equal(back.output.case, "embed");
  const out = back.output.value!;
  assert.deepEqual(Array.from(bytesToVectors(out.vectors)), Array.from(vectors));
  assert.equal(Buffer.from(out.vectors).readFloatLE(4), -1.25);
  assert.throws(() => decodeResult(new Uint8Array([1, 2, 3])), RecordDecodeError);
});

test("vectors decode from unaligned Buffer views (as Kafka records hand them over)", () => {
  const pool = Buffer.alloc(64);
  const view = pool.subarray(3, 3 + 8);
  view.writeFloatLE(1.5, 0);
  view.writeFloatLE(-2, 4);
  assert.deepEqual(Array.from(bytesToVectors(view)), [1.5, -2]);
});
