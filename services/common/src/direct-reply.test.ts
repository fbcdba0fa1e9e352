import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { sizeDelimitedEncode } from "@bufbuild/protobuf/wire";
import { type DirectResultAck, DirectResultAckSchema, DirectResultOutcome } from "@shoal/gen/shoal/v1/direct_pb.ts";
import { DelimitedTooLargeError, delimitedReader } from "./direct-reply.ts";

const ackBytes = (seq: number, reason = ""): Uint8Array =>
  sizeDelimitedEncode(DirectResultAckSchema, create(DirectResultAckSchema, { seq: BigInt(seq), outcome: DirectResultOutcome.REFUSED, reason }));

describe("delimitedReader (size-delimited messages out of a stream's chunks)", () => {
  test("the same messages whether they come whole, several to a chunk, or split at every byte", () => {
    const all = Buffer.concat([ackBytes(1), ackBytes(2, "signature"), ackBytes(300, "x".repeat(200))]);
    for (const cut of [all.length, 7, 1]) {
      const seen: DirectResultAck[] = [];
      const reader = delimitedReader(DirectResultAckSchema, 1_024, (m) => seen.push(m));
      for (let i = 0; i < all.length; i += cut) reader.push(all.subarray(i, i + cut));
      assert.deepEqual(
        seen.map((m) => [Number(m.seq), m.reason.length]),
        [
          [1, 0],
          [2, 9],
          [300, 200],
        ],
        `chunks of ${cut} bytes`,
      );
    }
  });

  test("a message over the limit throws as soon as its size is read; bytes that do not decode throw", () => {
    const reader = delimitedReader(DirectResultAckSchema, 64, () => undefined);
    assert.throws(() => reader.push(ackBytes(1, "y".repeat(100)).subarray(0, 3)), DelimitedTooLargeError);
    const garbage = delimitedReader(DirectResultAckSchema, 64, () => undefined);
    assert.throws(() => garbage.push(Buffer.from([4, 0xff, 0xff, 0xff, 0xff])));
  });
});
