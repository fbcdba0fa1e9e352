import http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { sizeDelimitedEncode } from "@bufbuild/protobuf/wire";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import {
  Attr,
  contextFromHeaders,
  decodeResult,
  DelimitedTooLargeError,
  delimitedReader,
  DIRECT_REPLY_GATEWAY_HEADER,
  DIRECT_REPLY_OUTCOME_HEADER,
  DIRECT_REPLY_PATH,
  DIRECT_REPLY_STREAM_PATH,
  MAX_RECORD_BYTES,
  RecordDecodeError,
  shoalTracer,
  SIGNATURE_HEADER,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
import { DirectResultAckSchema, DirectResultFrameSchema, DirectResultOutcome } from "@shoal/gen/shoal/v1/direct_pb.ts";
import type { JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { SettleOutcome } from "./pending-jobs.ts";

/**
 * Where this gateway takes results straight from workers (issue #17): the reply topic costs every
 * call a Produce and a Fetch on the brokers and a hop each way; a worker that can reach this
 * listener hands the result to the gateway that holds the call instead, and falls back to the
 * reply topic whenever it cannot (refused, timed out, another gateway answering). The listener is
 * plain HTTP/2 (h2c) on its own port — never the public one — and, with cluster keys, takes only
 * results signed as the reply topic's are.
 */
export interface DirectReplyServer {
  /** Listens; resolves with the address workers are told (SHOAL_DIRECT_REPLY_ADVERTISE, else host:port). */
  start(): Promise<string>;
  stop(): Promise<void>;
}

export interface DirectReplyOptions {
  readonly instanceId: string;
  /** This gateway's reply topic: the receipt span is named after it, as the topic's own receipt is. */
  readonly replyTopic: string;
  readonly host: string;
  readonly port: number;
  /** host:port workers are told; default the listener's own (a wildcard host: this machine's name). */
  readonly advertise: string | undefined;
  readonly onResult: (result: JobResult) => SettleOutcome;
  readonly signer?: RecordSigner;
  /** Whether workers may send results as frames of one stream (default true); false: 404, so they POST each. */
  readonly streams?: boolean;
  /** Largest result taken (default MAX_RECORD_BYTES, the reply topic's own limit). */
  readonly maxBytes?: number;
  /** Each result taken (`settled`: a call was waiting; `unknown`: a duplicate or a call that left). */
  readonly onReceived?: (outcome: SettleOutcome) => void;
  /** Each request refused (reason: signature, malformed, misdirected, too_large). */
  readonly onRefused?: (reason: DirectReplyRefusal) => void;
}

export type DirectReplyRefusal = "signature" | "malformed" | "misdirected" | "too_large";

const STATUS: Record<DirectReplyRefusal, number> = { signature: 403, malformed: 400, misdirected: 421, too_large: 413 };

/** What became of one result: taken (with its call's outcome), refused, or failed (a bug). */
type Taken = { readonly outcome: SettleOutcome } | { readonly refused: DirectReplyRefusal } | { readonly failed: true };

/** A frame's bytes beyond its result (sequence number, signature, trace headers). */
const FRAME_OVERHEAD_BYTES = 4_096;

export function createDirectReplyServer(logger: Logger, opts: DirectReplyOptions): DirectReplyServer {
  const log = logger.child({ component: "direct-replies" });
  const maxBytes = opts.maxBytes ?? MAX_RECORD_BYTES;
  let lastWarnMs = 0;
  const server = http2.createServer({
    // Workers keep one session each and send many results on it at once.
    settings: { maxConcurrentStreams: 1_000 },
    maxSessionMemory: 64,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  // Open result streams: a stop ends them (a session's graceful close would wait for them forever).
  const streams = new Set<http2.ServerHttp2Stream>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
    // An idle worker connection is closed after a while, its result stream with it (else the
    // graceful close would wait for the stream); the worker opens a new one when it needs it.
    session.setTimeout(120_000, () => {
      for (const s of streams) if (s.session === session) s.close(http2.constants.NGHTTP2_NO_ERROR);
      session.close();
    });
  });

  function noteRefusal(reason: DirectReplyRefusal, detail: Record<string, unknown>): void {
    opts.onRefused?.(reason);
    if (Date.now() - lastWarnMs >= 10_000) {
      lastWarnMs = Date.now();
      log.warn({ reason, ...detail }, "direct result refused");
    }
  }

  function refuse(stream: http2.ServerHttp2Stream, reason: DirectReplyRefusal, detail: Record<string, unknown> = {}): void {
    noteRefusal(reason, detail);
    answerRefusal(stream, reason);
  }

  /** Answers a POST or a stream with a refusal's status (already noted). */
  function answerRefusal(stream: http2.ServerHttp2Stream, reason: DirectReplyRefusal): void {
    if (!stream.destroyed && !stream.headersSent) stream.respond({ ":status": STATUS[reason] }, { endStream: true });
    // A body still arriving is not read.
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }

  /** Hands one result to its call: what the worker is told (a refusal, noted here, sends it through the reply topic). */
  function take(value: Uint8Array, signature: string | undefined, traceHeaders: Record<string, string>): Taken {
    if (opts.signer !== undefined && !opts.signer.verify("result", value, signature)) {
      noteRefusal("signature", {});
      return { refused: "signature" };
    }
    // Named as the reply topic's receipt is (the same hop to an operator reading the trace), marked direct.
    const span = shoalTracer().startSpan(
      `process ${opts.replyTopic}`,
      { kind: SpanKind.CONSUMER, attributes: { [Attr.MESSAGING_OPERATION_TYPE]: "process", [Attr.REPLY_VIA]: "direct" } },
      contextFromHeaders(traceHeaders),
    );
    try {
      const result = decodeResult(value);
      span.setAttribute(Attr.JOB_ID, result.jobId);
      const outcome = opts.onResult(result);
      opts.onReceived?.(outcome);
      if (outcome === "unknown") log.debug({ jobId: result.jobId }, "direct result with no waiting call dropped (late or duplicate)");
      return { outcome };
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      if (err instanceof RecordDecodeError) {
        noteRefusal("malformed", { err: err.message });
        return { refused: "malformed" };
      }
      // Thrown in a stream event, it would take the gateway down: the worker sends the result
      // through the reply topic instead.
      log.error({ err }, "a direct result could not be handed to its call");
      return { failed: true };
    } finally {
      span.end();
    }
  }

  /** One result per POST: 200 with the outcome, or a refusal's status. */
  function servePost(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const declared = Number(headers["content-length"] ?? 0);
    if (declared > maxBytes) return refuse(stream, "too_large", { bytes: declared });
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        chunks.length = 0;
        refuse(stream, "too_large", { bytes: size });
        return;
      }
      chunks.push(chunk);
    });
    stream.on("end", () => {
      if (stream.destroyed || stream.headersSent) return;
      const value = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      const signature = headers[SIGNATURE_HEADER];
      const taken = take(value, typeof signature === "string" ? signature : undefined, headers as Record<string, string>);
      if ("outcome" in taken) stream.respond({ ":status": 200, [DIRECT_REPLY_OUTCOME_HEADER]: taken.outcome }, { endStream: true });
      else if ("refused" in taken) answerRefusal(stream, taken.refused);
      else if (!stream.destroyed && !stream.headersSent) stream.respond({ ":status": 500 }, { endStream: true });
    });
  }

  /**
   * A worker's result stream: every frame is taken as a POST's body would be and answered by an
   * ack in order. A frame that cannot be read (undecodable, over the limit) ends the stream: the
   * worker sends that one, and whatever it sent after it, through the reply topic.
   */
  function serveStream(stream: http2.ServerHttp2Stream): void {
    stream.respond({ ":status": 200, "content-type": "application/x-protobuf" });
    streams.add(stream);
    stream.on("close", () => streams.delete(stream));
    const ack = (seq: bigint, taken: Taken): Uint8Array =>
      sizeDelimitedEncode(
        DirectResultAckSchema,
        create(DirectResultAckSchema, {
          seq,
          ...("outcome" in taken
            ? { outcome: taken.outcome === "delivered" ? DirectResultOutcome.DELIVERED : DirectResultOutcome.UNKNOWN }
            : { outcome: DirectResultOutcome.REFUSED, reason: "refused" in taken ? taken.refused : "failed" }),
        }),
      );
    // Frames arriving together are acked in one write.
    const acks: Uint8Array[] = [];
    const reader = delimitedReader(DirectResultFrameSchema, maxBytes + FRAME_OVERHEAD_BYTES, (frame) => {
      acks.push(ack(frame.seq, take(frame.result, frame.signature === "" ? undefined : frame.signature, frame.headers)));
    });
    let unreadable = false;
    stream.on("data", (chunk: Buffer) => {
      if (unreadable) return;
      try {
        reader.push(chunk);
      } catch (err) {
        // A frame that cannot be read: the frames before it keep their acks, and the stream ends.
        unreadable = true;
        noteRefusal(err instanceof DelimitedTooLargeError ? "too_large" : "malformed", { err: (err as Error).message });
      }
      if (acks.length > 0 && !stream.destroyed) stream.write(acks.length === 1 ? acks[0]! : Buffer.concat(acks));
      acks.length = 0;
      if (unreadable && !stream.destroyed) stream.end();
    });
    stream.on("end", () => {
      if (!stream.destroyed) stream.end();
    });
  }

  server.on("stream", (stream, headers) => {
    stream.on("error", () => undefined);
    const path = headers[":path"];
    const known = path === DIRECT_REPLY_PATH || (path === DIRECT_REPLY_STREAM_PATH && opts.streams !== false);
    if (headers[":method"] !== "POST" || !known) {
      stream.respond({ ":status": 404 }, { endStream: true });
      return;
    }
    // Another gateway may listen where this one did (a restart on the same port): the worker must
    // learn that its result was not taken here, and send it through the reply topic.
    if (headers[DIRECT_REPLY_GATEWAY_HEADER] !== opts.instanceId) return refuse(stream, "misdirected");
    if (path === DIRECT_REPLY_STREAM_PATH) serveStream(stream);
    else servePost(stream, headers);
  });

  return {
    start() {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(opts.port, opts.host, () => {
          server.off("error", reject);
          const { port } = server.address() as AddressInfo;
          const wildcard = opts.host === "0.0.0.0" || opts.host === "::" || opts.host === "";
          const host = wildcard ? hostname() : opts.host.includes(":") ? `[${opts.host}]` : opts.host;
          const advertised = opts.advertise ?? `${host}:${port}`;
          log.info({ listen: `${opts.host}:${port}`, advertised }, "taking results directly from workers");
          resolve(advertised);
        });
      });
    },
    stop() {
      return new Promise((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        // Results in flight on a stream go through the reply topic (the worker sees the stream end).
        for (const s of streams) s.close(http2.constants.NGHTTP2_NO_ERROR);
        for (const s of sessions) s.close();
      });
    },
  };
}
