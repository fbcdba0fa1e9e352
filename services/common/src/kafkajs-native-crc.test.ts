import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mock, test } from "node:test";
import crc32 from "@node-rs/crc32";
import compression from "kafkajs/src/protocol/message/compression/index.js";
import jsCrc32c from "kafkajs/src/protocol/recordBatch/crc32C/index.js";
import encodeRecord from "kafkajs/src/protocol/recordBatch/record/v0/index.js";
import recordBatchV0, { type RecordBatchOptions } from "kafkajs/src/protocol/recordBatch/v0/index.js";
import produce from "kafkajs/src/protocol/requests/produce/index.js";
import Long from "kafkajs/src/utils/long.js";
import { createKafka } from "./kafka.ts";
import { useNativeKafkajsCrc } from "./kafkajs-native-crc.ts";
import { createLogger } from "./logger.ts";

/** kafkajs' own encoder, kept before anything replaces it. */
const kafkajsRecordBatch = recordBatchV0.RecordBatch;

test("the native CRC-32C gives kafkajs' checksum on random buffers from 0 bytes to 3 MiB", () => {
  const MiB = 1 << 20;
  const sizes = [0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 255, 1000, 4096, 4099, 65_537, MiB - 1, MiB, MiB + 13, 3 * MiB];
  for (const size of sizes) {
    const buffer = randomBytes(size);
    assert.equal(crc32.crc32c(buffer), jsCrc32c(buffer), `${size} bytes`);
  }
  // A view at an odd offset into a larger buffer (as `Encoder.buffer` is a view of its `buf`).
  const big = randomBytes(100_003);
  const view = big.subarray(7, 99_990);
  assert.equal(crc32.crc32c(view), jsCrc32c(view));
  assert.equal(crc32.crc32c(Buffer.from("123456789")), 0xe3069283, "the CRC-32C check value");
  assert.equal(crc32.crc32c(Buffer.alloc(64, 0xff)), jsCrc32c(Buffer.alloc(64, 0xff)), "a checksum with the top bit set is unsigned in both");
});

test("createKafka installs the native CRC in kafkajs' record batch encoder", () => {
  assert.equal(recordBatchV0.RecordBatch, kafkajsRecordBatch, "not yet installed");
  createKafka(
    { brokers: ["127.0.0.1:1"], clientId: "crc-test", ssl: false, connectionTimeoutMs: 1000, requestTimeoutMs: 1000 },
    createLogger("test", "silent"),
  );
  assert.notEqual(recordBatchV0.RecordBatch, kafkajsRecordBatch);
  const installed = recordBatchV0.RecordBatch;
  useNativeKafkajsCrc();
  assert.equal(recordBatchV0.RecordBatch, installed, "idempotent");
});

test("the encoder with the native CRC writes the same record batches as kafkajs', byte for byte", async () => {
  useNativeKafkajsCrc();
  const records = (values: Array<Buffer | string | null>, headers?: Record<string, string>) =>
    values.map((value, i) => encodeRecord({ offsetDelta: i, timestampDelta: i, key: i % 2 === 0 ? `key-${i}` : null, value, ...(headers ? { headers } : {}) }));
  const at = { firstTimestamp: 1_765_000_000_000, maxTimestamp: 1_765_000_000_123 };
  const cases: Array<[string, RecordBatchOptions]> = [
    ["no records", { ...at }],
    ["one small record", { ...at, records: records(["hello"]) }],
    [
      "1,000 small records with headers",
      {
        ...at,
        records: records(
          Array.from({ length: 1000 }, (_, i) => `job ${i}`),
          { traceparent: "00-abc-def-01" },
        ),
        lastOffsetDelta: 999,
      },
    ],
    ["one 2 MiB record", { ...at, records: records([randomBytes(2 << 20)]) }],
    ["a null value (tombstone)", { ...at, records: records([null]) }],
    [
      "idempotent and transactional",
      { ...at, records: records(["a", "b"]), producerId: Long.fromInt(4242), producerEpoch: 3, firstSequence: 17, transactional: true, lastOffsetDelta: 1 },
    ],
    [
      "gzip",
      {
        ...at,
        records: records(Array.from({ length: 50 }, (_, i) => `compressible ${i} `.repeat(20))),
        compression: compression.Types.GZIP,
        lastOffsetDelta: 49,
      },
    ],
  ];
  for (const [name, options] of cases) {
    const theirs = (await kafkajsRecordBatch(options)).buffer;
    const ours = (await recordBatchV0.RecordBatch(options)).buffer;
    assert.ok(ours.equals(theirs), name);
  }
});

test("a Produce request that kafkajs encodes after the patch takes its CRC from the native function", async (t) => {
  useNativeKafkajsCrc();
  const spy = mock.method(crc32, "crc32c");
  t.after(() => spy.mock.restore());
  const value = randomBytes(300_000);
  // Produce v7, what kafkajs sends to Kafka 3.x/4.x; v3–v6 encode through the same module.
  const { request } = produce.protocol({ version: 7 })({
    acks: -1,
    timeout: 30_000,
    topicData: [{ topic: "jobs", partitions: [{ partition: 2, messages: [{ key: "k", value }] }] }],
  });
  const bytes = (await request.encode()).buffer;
  assert.equal(spy.mock.callCount(), 1);

  // transactional_id (null), acks, timeout, [topic] "jobs", [partition] 2, record set size, then the batch:
  // base offset (8), length (4), leader epoch (4), magic (1), CRC (4), then what the CRC covers.
  const batchAt = 2 + 2 + 4 + 4 + (2 + 4) + 4 + 4 + 4;
  const crcAt = batchAt + 8 + 4 + 4 + 1;
  const length = bytes.readInt32BE(batchAt + 8);
  const covered = bytes.subarray(crcAt + 4, batchAt + 12 + length);
  assert.equal(bytes.readInt8(crcAt - 1), recordBatchV0.MAGIC_BYTE);
  const crcInput = spy.mock.calls[0]?.arguments[0];
  assert.ok(Buffer.isBuffer(crcInput) && crcInput.equals(covered), "the native CRC ran over the batch body");
  assert.equal(bytes.readUInt32BE(crcAt), jsCrc32c(covered), "and wrote the checksum kafkajs would have");
});
