import assert from "node:assert/strict";
import { test } from "node:test";
import type { RecordsBatch } from "@platformatic/kafka";
import { headOffset, timestampAt } from "./head-requests.ts";

const need = (startOffset: bigint, lag?: bigint) => ({ topic: "t", partition: 0, startOffset, ...(lag === undefined ? {} : { lag }) });

test("the head sits at high watermark − lag, never before the start offset; nothing waits at lag 0", () => {
  // The coordinator's start offset trails: 3 of 10 records accepted in order, start offset still 0.
  assert.equal(headOffset(need(0n, 7n), 10n), 3n);
  // Lag larger than the span from the start offset (cannot be, but a stale read may say so).
  assert.equal(headOffset(need(5n, 7n), 10n), 5n);
  assert.equal(headOffset(need(4n, 0n), 10n), undefined);
  // A broker without KIP-1226 lag: the start offset, if anything lies beyond it.
  assert.equal(headOffset(need(4n), 10n), 4n);
  assert.equal(headOffset(need(10n), 10n), undefined);
});

function batch(firstOffset: bigint, firstTimestamp: bigint, deltas: number[], attributes = 0): RecordsBatch {
  return {
    firstOffset,
    firstTimestamp,
    maxTimestamp: firstTimestamp + BigInt(Math.max(0, ...deltas)),
    attributes,
    length: 0,
    partitionLeaderEpoch: 0,
    magic: 2,
    crc: 0,
    lastOffsetDelta: deltas.length - 1,
    producerId: -1n,
    producerEpoch: -1,
    firstSequence: -1,
    records: deltas.map((d, i) => ({ length: 0, attributes: 0, timestampDelta: BigInt(d), offsetDelta: i, key: null, value: null, headers: [] })),
  };
}

test("a record's timestamp: CreateTime from its batch's first timestamp and its delta; LogAppendTime for the whole batch; control batches skipped", () => {
  const batches = [batch(10n, 1_000n, [0, 5, 9]), batch(13n, 2_000n, [0, 1])];
  assert.equal(timestampAt(batches, 10n), 1_000);
  assert.equal(timestampAt(batches, 12n), 1_009);
  assert.equal(timestampAt(batches, 14n), 2_001);
  // Past what was read (a batch cut short, a head beyond the bytes asked for): unknown.
  assert.equal(timestampAt(batches, 15n), undefined);
  // Compacted away: the next record there is.
  assert.equal(timestampAt([batch(20n, 3_000n, [0, 4])], 18n), 3_000);
  assert.equal(timestampAt([batch(0n, 5_000n, [0, 7], 0x08)], 0n), 5_007);
  assert.equal(timestampAt([batch(0n, 9n, [0], 0x20), batch(1n, 6_000n, [0])], 0n), 6_000);
});
