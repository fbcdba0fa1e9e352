import http2 from "node:http2";
import { type Req, type Res, writeHead } from "./http-types.ts";

/** The codes the gateway answers itself, in front of Connect, before a request's body is read. */
export type EarlyCode = "unauthenticated" | "resource_exhausted";

const GRPC_STATUS: Readonly<Record<EarlyCode, string>> = { unauthenticated: "16", resource_exhausted: "8" };
const HTTP_STATUS: Readonly<Record<EarlyCode, number>> = { unauthenticated: 401, resource_exhausted: 429 };

/**
 * Answers a call with `code` in its own protocol without reading its body: gRPC and gRPC-Web get a
 * trailers-only response (`grpc-status`), Connect and plain HTTP the status and a Connect error
 * body. An HTTP/2 caller still uploading must be told to stop (`stopUploadAfterResponse`, which
 * the HTTP front arms for every stream).
 */
export function refuseEarly(req: Req, res: Res, code: EarlyCode, message: string, headers: Readonly<Record<string, string>> = {}): void {
  const type = req.headers["content-type"] ?? "";
  if (/^application\/grpc/i.test(type)) {
    writeHead(res, 200, {
      "content-type": type.split(";")[0] ?? "application/grpc",
      "grpc-status": GRPC_STATUS[code],
      "grpc-message": encodeURIComponent(message),
      ...headers,
    });
    res.end();
  } else {
    writeHead(res, HTTP_STATUS[code], { "content-type": "application/json", ...headers });
    res.end(JSON.stringify({ code, message }));
  }
}

/** How long a finished HTTP/2 response waits for a trailer-less stream's upload before resetting it. */
const UNREAD_UPLOAD_GRACE_MS = 1_000;

/**
 * An HTTP/2 response that is complete while the request body is still arriving (an error sent
 * before the body was read, e.g. a message over the size limit) leaves the rest of the body
 * unread: the flow-control window never reopens, the client can never finish its upload, and the
 * stream never closes — the caller hangs although its answer was sent. Once the response has gone,
 * tell the client to stop sending (RST_STREAM NO_ERROR, which RFC 9113 §8.1 provides for): right
 * after the trailers for gRPC, after a short grace otherwise (so the reset cannot overtake the
 * last DATA frame). Once per stream.
 */
export function stopUploadAfterResponse(req: http2.Http2ServerRequest): void {
  const stream = req.stream;
  const reset = (): void => {
    if (!req.readableEnded && !stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  };
  stream.once("finish", () => {
    if (req.readableEnded || stream.destroyed) return;
    const timer = setTimeout(reset, UNREAD_UPLOAD_GRACE_MS);
    stream.once("close", () => clearTimeout(timer));
    stream.once("wantTrailers", () => setImmediate(reset));
  });
}
