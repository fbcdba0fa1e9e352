import type * as http from "node:http";
import type * as http2 from "node:http2";

/** A request on either listener: HTTP/1.1 or HTTP/2 (the gateway serves both on one port). */
export type Req = http.IncomingMessage | http2.Http2ServerRequest;
/** A response on either listener. */
export type Res = http.ServerResponse | http2.Http2ServerResponse;
/** A request handler that serves both HTTP versions. */
export type Handler = (req: Req, res: Res) => void;

/**
 * `res.writeHead` for either HTTP version. @types/node 24 types the two overloads apart, so a
 * call on the union does not type-check; at run time both take (status, headers).
 */
export function writeHead(res: Res, status: number, headers: http.OutgoingHttpHeaders): void {
  (res as http.ServerResponse).writeHead(status, headers);
}
