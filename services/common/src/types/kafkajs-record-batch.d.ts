/** The parts of kafkajs' private record batch encoding (2.2.4) that kafkajs-native-crc.ts replaces and its tests compare. */
declare module "kafkajs/src/protocol/encoder.js" {
  export default class Encoder {
    buf: Buffer;
    offset: number;
    get buffer(): Buffer;
    size(): number;
    writeInt8(value: number): this;
    writeInt16(value: number): this;
    writeInt32(value: number): this;
    writeUInt32(value: number): this;
    writeInt64(value: unknown): this;
    writeBuffer(value: Buffer): this;
    writeBytes(value: Buffer | null): this;
    writeEncoder(value: Encoder): this;
    writeEncoderArray(value: Encoder[]): this;
    writeArray(value: unknown[], type?: string): this;
  }
}

declare module "kafkajs/src/utils/long.js" {
  export default class Long {
    static fromInt(value: number): Long;
    static fromValue(value: unknown): Long;
    toString(): string;
  }
}

declare module "kafkajs/src/protocol/message/compression/index.js" {
  import type Encoder from "kafkajs/src/protocol/encoder.js";
  const compression: {
    Types: { None: 0; GZIP: 1; Snappy: 2; LZ4: 3; ZSTD: 4 };
    COMPRESSION_CODEC_MASK: number;
    lookupCodec(type: number): { compress(encoder: Encoder): Promise<Buffer> } | null;
  };
  export default compression;
}

declare module "kafkajs/src/protocol/recordBatch/v0/index.js" {
  import type Encoder from "kafkajs/src/protocol/encoder.js";
  import type Long from "kafkajs/src/utils/long.js";
  export interface RecordBatchOptions {
    compression?: number;
    firstOffset?: Long;
    firstTimestamp?: number;
    maxTimestamp?: number;
    partitionLeaderEpoch?: number;
    lastOffsetDelta?: number;
    transactional?: boolean;
    producerId?: Long;
    producerEpoch?: number;
    firstSequence?: number;
    records?: Encoder[];
  }
  const recordBatch: { RecordBatch: (options: RecordBatchOptions) => Promise<Encoder>; MAGIC_BYTE: number };
  export default recordBatch;
}

declare module "kafkajs/src/protocol/recordBatch/crc32C/index.js" {
  const crc32C: (buffer: Buffer) => number;
  export default crc32C;
}

declare module "kafkajs/src/protocol/recordBatch/record/v0/index.js" {
  import type Encoder from "kafkajs/src/protocol/encoder.js";
  const encodeRecord: (options: {
    offsetDelta?: number;
    timestampDelta?: number;
    key?: Buffer | string | null;
    value: Buffer | string | null;
    headers?: Record<string, Buffer | string>;
  }) => Encoder;
  export default encodeRecord;
}

declare module "kafkajs/src/protocol/requests/produce/index.js" {
  import type Encoder from "kafkajs/src/protocol/encoder.js";
  const produce: {
    protocol(options: { version: number }): (request: {
      acks: number;
      timeout: number;
      compression?: number;
      transactionalId?: string | null;
      topicData: Array<{
        topic: string;
        partitions: Array<{
          partition: number;
          firstSequence?: number;
          messages: Array<{ key?: Buffer | string | null; value: Buffer | string | null; timestamp?: number }>;
        }>;
      }>;
    }) => { request: { encode(): Promise<Encoder> } };
  };
  export default produce;
}
