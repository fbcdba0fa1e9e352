import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import {
  Attr,
  contextFromHeaders,
  decodeResult,
  DIRECT_REPLY_GATEWAY_HEADER,
  DIRECT_REPLY_OUTCOME_HEADER,
  DIRECT_REPLY_PATH,
  MAX_RECORD_BYTES,
  RecordDecodeError,
  shoalTracer,
  SIGNATURE_HEADER,
  type Logger,
  type RecordSigner,
} from "@shoal/common";
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
  /** Largest result taken (default MAX_RECORD_BYTES, the reply topic's own limit). */
  readonly maxBytes?: number;
  /** Each result taken (`settled`: a call was waiting; `unknown`: a duplicate or a call that left). */
  readonly onReceived?: (outcome: SettleOutcome) => void;
  /** Each request refused (reason: signature, malformed, misdirected, too_large). */
  readonly onRefused?: (reason: DirectReplyRefusal) => void;
}

export type DirectReplyRefusal = "signature" | "malformed" | "misdirected" | "too_large";

const STATUS: Record<DirectReplyRefusal, number> = { signature: 403, malformed: 400, misdirected: 421, too_large: 413 };

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
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
    // An idle worker connection is closed after a while; the worker opens a new one when it needs it.
    session.setTimeout(120_000, () => session.close());
  });

  function refuse(stream: http2.ServerHttp2Stream, reason: DirectReplyRefusal, detail: Record<string, unknown> = {}): void {
    opts.onRefused?.(reason);
    if (Date.now() - lastWarnMs >= 10_000) {
      lastWarnMs = Date.now();
      log.warn({ reason, ...detail }, "direct result refused");
    }
    if (!stream.destroyed && !stream.headersSent) stream.respond({ ":status": STATUS[reason] }, { endStream: true });
    // A body still arriving is not read.
    if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }

  server.on("stream", (stream, headers) => {
    stream.on("error", () => undefined);
    if (headers[":method"] !== "POST" || headers[":path"] !== DIRECT_REPLY_PATH) {
      stream.respond({ ":status": 404 }, { endStream: true });
      return;
    }
    // Another gateway may listen where this one did (a restart on the same port): the worker must
    // learn that its result was not taken here, and send it through the reply topic.
    if (headers[DIRECT_REPLY_GATEWAY_HEADER] !== opts.instanceId) return refuse(stream, "misdirected");
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
      if (opts.signer !== undefined && !opts.signer.verify("result", value, typeof signature === "string" ? signature : undefined)) {
        return refuse(stream, "signature");
      }
      // Named as the reply topic's receipt is (the same hop to an operator reading the trace), marked direct.
      const span = shoalTracer().startSpan(
        `process ${opts.replyTopic}`,
        { kind: SpanKind.CONSUMER, attributes: { [Attr.MESSAGING_OPERATION_TYPE]: "process", [Attr.REPLY_VIA]: "direct" } },
        contextFromHeaders(headers as Record<string, string>),
      );
      try {
        const result = decodeResult(value);
        span.setAttribute(Attr.JOB_ID, result.jobId);
        const outcome = opts.onResult(result);
        opts.onReceived?.(outcome);
        if (outcome === "unknown") log.debug({ jobId: result.jobId }, "direct result with no waiting call dropped (late or duplicate)");
        stream.respond({ ":status": 200, [DIRECT_REPLY_OUTCOME_HEADER]: outcome }, { endStream: true });
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        if (err instanceof RecordDecodeError) refuse(stream, "malformed", { err: err.message });
        else {
          // Thrown in a stream event, it would take the gateway down: the worker sends the result
          // through the reply topic instead (any status but 200).
          log.error({ err }, "a direct result could not be handed to its call");
          if (!stream.destroyed && !stream.headersSent) stream.respond({ ":status": 500 }, { endStream: true });
        }
      } finally {
        span.end();
      }
    });
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
        for (const s of sessions) s.close();
      });
    },
  };
}
