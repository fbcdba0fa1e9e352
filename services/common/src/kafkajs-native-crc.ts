/**
 * kafkajs 2.2.4 computes each record batch's CRC-32C with a byte loop in JavaScript
 * (`recordBatch/crc32C`): ~18 ms of CPU for an 8 MiB job envelope, about 42 % of the gateway's
 * event-loop time per huge call (issue #52; docs/benchmarks.md). This replaces it with the
 * `crc32c` of @node-rs/crc32 (Rust on N-API, prebuilt per platform), which gives the same
 * checksum.
 *
 * kafkajs has no hook for it, and neither of its modules can be swapped at the point of use: the
 * record batch encoder (`recordBatch/v0`) binds `require('../crc32C')` into a `const` when it is
 * loaded, and the Produce request (`requests/produce/v3`, which v4–v7 build on) destructures
 * `RecordBatch` from the encoder's exports when *it* is loaded. And the services run bundled
 * (infra/image/build-services.ts), where a module's exports cannot be replaced from outside. What
 * can be changed, bundled or not, is the property on the encoder's exports object before the
 * Produce request module reads it, which kafkajs does lazily, on the first Produce request a
 * process encodes. So `RecordBatch` is replaced by the same encoding with the native CRC
 * (`kafkajs-native-crc.test.ts` checks it byte for byte against kafkajs' own, and that a Produce
 * request encoded afterwards goes through it); `createKafka` installs it before any client exists.
 * A process that encoded a Produce request before that keeps the JavaScript CRC: still correct.
 *
 * Only producing needs it: kafkajs does not verify CRCs on fetch (`recordBatch/v0/decoder.js`).
 */
import crc32 from "@node-rs/crc32";
import Encoder from "kafkajs/src/protocol/encoder.js";
import compression from "kafkajs/src/protocol/message/compression/index.js";
import recordBatchV0, { type RecordBatchOptions } from "kafkajs/src/protocol/recordBatch/v0/index.js";
import Long from "kafkajs/src/utils/long.js";

const TRANSACTIONAL_MASK = 16;

/**
 * kafkajs 2.2.4's `RecordBatch` (recordBatch/v0/index.js) line for line, except that the CRC is
 * the native one. `crc32.crc32c` is looked up at each call, so a test can spy on it.
 */
async function recordBatchWithNativeCrc({
  compression: codec = compression.Types.None,
  firstOffset = Long.fromInt(0),
  firstTimestamp = Date.now(),
  maxTimestamp = Date.now(),
  partitionLeaderEpoch = 0,
  lastOffsetDelta = 0,
  transactional = false,
  producerId = Long.fromValue(-1),
  producerEpoch = 0,
  firstSequence = 0,
  records = [],
}: RecordBatchOptions): Promise<Encoder> {
  const attributes = (codec & compression.COMPRESSION_CODEC_MASK) | (transactional ? TRANSACTIONAL_MASK : 0);
  const batchBody = new Encoder()
    .writeInt16(attributes)
    .writeInt32(lastOffsetDelta)
    .writeInt64(firstTimestamp)
    .writeInt64(maxTimestamp)
    .writeInt64(producerId)
    .writeInt16(producerEpoch)
    .writeInt32(firstSequence);
  if (codec === compression.Types.None) {
    if (records.every((r) => typeof r === typeof records[0])) batchBody.writeArray(records, typeof records[0]);
    else batchBody.writeArray(records);
  } else {
    const lookedUp = compression.lookupCodec(codec);
    if (!lookedUp) throw new Error(`kafkajs has no codec for compression type ${codec}`); // kafkajs itself fails on null here
    const recordsEncoder = new Encoder().writeEncoderArray(records);
    batchBody.writeInt32(records.length).writeBuffer(await lookedUp.compress(recordsEncoder));
  }
  const batch = new Encoder()
    .writeInt32(partitionLeaderEpoch)
    .writeInt8(recordBatchV0.MAGIC_BYTE)
    .writeUInt32(crc32.crc32c(batchBody.buffer) >>> 0)
    .writeEncoder(batchBody);
  return new Encoder().writeInt64(firstOffset).writeBytes(batch.buffer);
}

let patched = false;

/**
 * Makes kafkajs compute record batch CRCs natively (see the module comment). Idempotent; must run
 * before the process encodes its first Produce request. kafkajs is pinned to 2.2.4.
 */
export function useNativeKafkajsCrc(): void {
  if (patched) return;
  patched = true;
  recordBatchV0.RecordBatch = recordBatchWithNativeCrc;
}
