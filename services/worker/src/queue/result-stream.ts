import http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { sizeDelimitedEncode } from "@bufbuild/protobuf/wire";
import { DIRECT_REPLY_GATEWAY_HEADER, DIRECT_REPLY_STREAM_PATH, delimitedReader } from "@shoal/common";
import { DirectResultAckSchema, DirectResultFrameSchema, DirectResultOutcome } from "@shoal/gen/shoal/v1/direct_pb.ts";

/**
 * What became of a frame: taken by the gateway, or why it was not (the caller sends the result
 * through the reply topic; `unsupported`: the gateway predates result streams, send it as a POST).
 */
export type FrameOutcome = "taken" | "unsupported" | "refused" | "misdirected" | "unreachable" | "timeout";

/**
 * One worker's result stream to one gateway instance (issue #17, proto/shoal/v1/direct.proto): a
 * long-lived HTTP/2 request on which every result is a size-delimited DirectResultFrame, each
 * answered by a DirectResultAck. It spares each result the HTTP/2 stream a POST opens (headers,
 * stream state and events on both sides). Whatever ends the stream (the gateway stopping or gone,
 * a reset, an ack overdue) answers every frame still unacknowledged with why, at once; closing it
 * lets the frames in flight have their acks first.
 */
export interface ResultStream {
  send(value: Uint8Array, signature: string | undefined, headers: Record<string, string> | undefined): Promise<FrameOutcome>;
  /** True once the stream has ended or is closing: the next result needs a new one. */
  readonly ended: boolean;
  /** Sends no more frames; the ones in flight still get their acks (or the timeout). */
  close(): void;
}

/** An ack is a few bytes; anything much larger is not one. */
const MAX_ACK_BYTES = 1_024;

interface Unacked {
  readonly resolve: (outcome: FrameOutcome) => void;
  readonly sentAtMs: number;
}

/** Opens a result stream on `session` to the gateway `instanceId`; an ack later than `timeoutMs` ends it. */
export function openResultStream(session: http2.ClientHttp2Session, instanceId: string, timeoutMs: number): ResultStream {
  const req = session.request({
    ":method": "POST",
    ":path": DIRECT_REPLY_STREAM_PATH,
    "content-type": "application/x-protobuf",
    [DIRECT_REPLY_GATEWAY_HEADER]: instanceId,
  });
  // Acks come back in the order the frames went: the first entry is always the oldest.
  const unacked = new Map<bigint, Unacked>();
  let seq = 0n;
  let ended = false;
  let closing = false;
  let status = 0;
  let timer: NodeJS.Timeout | undefined;

  function end(why: Exclude<FrameOutcome, "taken">): void {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    for (const u of unacked.values()) u.resolve(why);
    unacked.clear();
    if (!req.destroyed) req.close(http2.constants.NGHTTP2_CANCEL);
  }

  /** Watches the oldest frame's ack: overdue ends the stream (the gateway is stuck or cut off). */
  function watch(): void {
    timer = undefined;
    const oldest = unacked.values().next().value;
    if (oldest === undefined) return;
    const dueInMs = oldest.sentAtMs + timeoutMs - Date.now();
    if (dueInMs <= 0) return end("timeout");
    timer = setTimeout(watch, dueInMs);
    timer.unref();
  }

  req.on("response", (h) => {
    status = Number(h[":status"]);
    if (status === 404) end("unsupported");
    else if (status === 421) end("misdirected");
    else if (status !== 200) end("refused");
  });
  req.on("error", () => end("unreachable"));
  req.on("close", () => end("unreachable"));
  const reader = delimitedReader(DirectResultAckSchema, MAX_ACK_BYTES, (ack) => {
    const u = unacked.get(ack.seq);
    if (u === undefined) return;
    unacked.delete(ack.seq);
    const taken = ack.outcome === DirectResultOutcome.DELIVERED || ack.outcome === DirectResultOutcome.UNKNOWN;
    u.resolve(taken ? "taken" : "refused");
  });
  req.on("data", (chunk: Buffer) => {
    try {
      reader.push(chunk);
    } catch {
      end("unreachable");
    }
  });
  // The gateway ended its side (stopping, idle, or a frame it could not read): what is unacked falls back.
  req.on("end", () => end("unreachable"));

  return {
    send(value, signature, headers) {
      if (ended || closing) return Promise.resolve("unreachable");
      seq += 1n;
      const frame = create(DirectResultFrameSchema, { seq, result: value, signature: signature ?? "", headers: headers ?? {} });
      return new Promise<FrameOutcome>((resolve) => {
        unacked.set(seq, { resolve, sentAtMs: Date.now() });
        if (timer === undefined) watch();
        req.write(sizeDelimitedEncode(DirectResultFrameSchema, frame));
      });
    },
    get ended() {
      return ended || closing;
    },
    close() {
      if (closing || ended) return;
      closing = true;
      // The gateway answers what it has, then ends its side, which ends the stream (the "end" handler).
      if (unacked.size === 0) end("unreachable");
      else req.end();
    },
  };
}
