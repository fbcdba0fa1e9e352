import { type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf";
import { sizeDelimitedPeek } from "@bufbuild/protobuf/wire";

/**
 * The direct reply path (issue #17): a worker hands a job's encoded JobResult to the gateway that
 * holds the call (the address its signed registration on shoal.gateways gives), over h2c, with the
 * result record's signature and trace headers; the reply topic stays the fallback. Two forms: one
 * POST per result (DIRECT_REPLY_PATH), or one long-lived request per gateway carrying every result
 * as a frame, each answered by an ack (DIRECT_REPLY_STREAM_PATH, proto/shoal/v1/direct.proto).
 */
export const DIRECT_REPLY_PATH = "/shoal.results";
/** The result stream: size-delimited DirectResultFrame up, DirectResultAck down. */
export const DIRECT_REPLY_STREAM_PATH = "/shoal.results.stream";
/** The instance id of the gateway the worker means: another gateway at that address refuses (421). */
export const DIRECT_REPLY_GATEWAY_HEADER = "shoal-gateway";
/** In the gateway's 200: `delivered` (a call was waiting) or `unknown` (a duplicate, or the call left). */
export const DIRECT_REPLY_OUTCOME_HEADER = "shoal-outcome";

/**
 * Reads size-delimited messages out of a byte stream's chunks as they arrive, synchronously (the
 * library's async-iterator reader costs promises per message on a path where every result
 * passes): `push` hands each complete message to `onMessage` and throws on one over `maxBytes`
 * or one that does not decode.
 */
export function delimitedReader<Desc extends DescMessage>(
  schema: Desc,
  maxBytes: number,
  onMessage: (message: MessageShape<Desc>) => void,
): { push(chunk: Uint8Array): void } {
  let held: Uint8Array = new Uint8Array(0);
  return {
    push(chunk) {
      let bytes = held.length === 0 ? chunk : Buffer.concat([held, chunk]);
      for (;;) {
        const size = sizeDelimitedPeek(bytes);
        if (size.eof) break;
        if (size.size > maxBytes) throw new DelimitedTooLargeError(size.size, maxBytes);
        const end = size.offset + size.size;
        if (end > bytes.length) break;
        onMessage(fromBinary(schema, bytes.subarray(size.offset, end)));
        bytes = bytes.subarray(end);
      }
      held = bytes;
    },
  };
}

/** A size-delimited message larger than the reader takes. */
export class DelimitedTooLargeError extends Error {
  constructor(size: number, maxBytes: number) {
    super(`a message of ${size} bytes is over the limit of ${maxBytes}`);
    this.name = "DelimitedTooLargeError";
  }
}
