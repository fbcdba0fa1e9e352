/**
 * `npm run bench:crc` — what the record batch CRC-32C costs a process that produces through
 * kafkajs, with kafkajs' own JavaScript CRC and with the native one that `createKafka` installs
 * (`useNativeKafkajsCrc`, @node-rs/crc32; issue #52). For each batch: the CRC alone over the bytes
 * it covers, and kafkajs' whole `RecordBatch` encode (records already encoded, as kafkajs has them
 * when it calls it), both in one process, median of BENCH_ITERATIONS runs after a warm-up. The
 * values are random bytes: a CRC's cost depends only on the length.
 *
 * Env: BENCH_ITERATIONS (15).
 */
import crc32 from "@node-rs/crc32";
import { useNativeKafkajsCrc } from "@shoal/common";
import jsCrc32c from "kafkajs/src/protocol/recordBatch/crc32C/index.js";
import encodeRecord from "kafkajs/src/protocol/recordBatch/record/v0/index.js";
import recordBatchV0, { type RecordBatchOptions } from "kafkajs/src/protocol/recordBatch/v0/index.js";
import { randomBytes } from "node:crypto";

const ITERATIONS = Number(process.env["BENCH_ITERATIONS"] ?? 15);
const KiB = 1024;
const MiB = 1024 * KiB;

/** Median ms of `fn` over ITERATIONS runs, after a third as many to warm up. */
async function medianMs(fn: () => unknown): Promise<number> {
  for (let i = 0; i < Math.max(2, ITERATIONS / 3); i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

const cases: Array<{ name: string; count: number; bytes: number }> = [
  { name: "one 4 MiB job envelope", count: 1, bytes: 4 * MiB },
  { name: "one 16 MiB job envelope", count: 1, bytes: 16 * MiB },
  { name: "1,000 records of 1 KiB (a full 1 MiB produce request)", count: 1000, bytes: KiB },
  { name: "100 records of 300 B", count: 100, bytes: 300 },
];

const kafkajsRecordBatch = recordBatchV0.RecordBatch;
useNativeKafkajsCrc();
const nativeRecordBatch = recordBatchV0.RecordBatch;

console.log(`Record batch CRC-32C: kafkajs 2.2.4's JavaScript loop against @node-rs/crc32's crc32c, Node ${process.version}, median of ${ITERATIONS}`);
console.log("| batch | CRC'd bytes | CRC JS ms | CRC native ms | ratio | RecordBatch JS ms | RecordBatch native ms | ratio |");
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
for (const c of cases) {
  const records = Array.from({ length: c.count }, (_, i) => encodeRecord({ offsetDelta: i, key: `job-${i}`, value: randomBytes(c.bytes) }));
  const options: RecordBatchOptions = { records, lastOffsetDelta: c.count - 1, firstTimestamp: 1_765_000_000_000, maxTimestamp: 1_765_000_000_000 };
  const theirs = (await kafkajsRecordBatch(options)).buffer;
  const ours = (await nativeRecordBatch(options)).buffer;
  if (!ours.equals(theirs)) throw new Error(`${c.name}: the native encoder wrote different bytes`);
  // The CRC covers the batch from its attributes on: after base offset, length, leader epoch, magic and the CRC itself.
  const covered = theirs.subarray(8 + 4 + 4 + 1 + 4);
  const crcJs = await medianMs(() => jsCrc32c(covered));
  const crcNative = await medianMs(() => crc32.crc32c(covered));
  const batchJs = await medianMs(() => kafkajsRecordBatch(options));
  const batchNative = await medianMs(() => nativeRecordBatch(options));
  console.log(
    `| ${c.name} | ${covered.length.toLocaleString("en")} | ${crcJs.toFixed(2)} | ${crcNative.toFixed(3)} | ${(crcJs / crcNative).toFixed(0)}× | ${batchJs.toFixed(2)} | ${batchNative.toFixed(2)} | ${(batchJs / batchNative).toFixed(1)}× |`,
  );
}
