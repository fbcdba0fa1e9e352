import type { TLSSocket } from "node:tls";
import type { Attributes } from "@opentelemetry/api";
import { type ConnectError, createContextKey } from "@connectrpc/connect";
import { Attr } from "@shoal/common";
import type { Req } from "./http-types.ts";

/**
 * A call that reached an RPC implementation through a plain-HTTP route (the OpenAI endpoint)
 * rather than an RPC path. It runs through the same interceptors as the RPCs; they name it by its
 * route instead of its RPC: a SERVER span `POST /v1/embeddings` with the HTTP semantic
 * conventions' attributes, and its own `method` label in the request metrics.
 */
export interface HttpRoute {
  /** `method` label of `shoal_gateway_requests_total` and the latency histogram. */
  readonly metricsMethod: string;
  /** The SERVER span's name: `POST /v1/embeddings`. */
  readonly spanName: string;
  /** The SERVER span's request attributes (method, path, route, scheme, protocol version, user agent). */
  readonly attributes: Attributes;
  /** The HTTP status the route answers with (`error` undefined: success); undefined if the caller left first. */
  statusOf(error: ConnectError | undefined): number | undefined;
}

/** Where an HTTP route leaves its {@link HttpRoute} for the interceptors. */
export const httpRouteKey = createContextKey<HttpRoute | undefined>(undefined, { description: "shoal.http-route" });

const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]);

function scheme(req: Req): string {
  if ("scheme" in req && typeof req.scheme === "string" && req.scheme !== "") return req.scheme;
  return (req.socket as Partial<TLSSocket> | null)?.encrypted === true ? "https" : "http";
}

/** The {@link HttpRoute} of one request on `route`. */
export function httpRoute(req: Req, route: string, metricsMethod: string, statusOf: HttpRoute["statusOf"]): HttpRoute {
  const raw = (req.method ?? "").toUpperCase();
  const method = HTTP_METHODS.has(raw) ? raw : "_OTHER";
  const userAgent = req.headers["user-agent"];
  return {
    metricsMethod,
    spanName: `${method === "_OTHER" ? "HTTP" : method} ${route}`,
    attributes: {
      [Attr.HTTP_REQUEST_METHOD]: method,
      ...(method === "_OTHER" ? { [Attr.HTTP_REQUEST_METHOD_ORIGINAL]: req.method ?? "" } : {}),
      [Attr.URL_PATH]: (req.url ?? route).split("?", 1)[0] ?? route,
      [Attr.URL_SCHEME]: scheme(req),
      [Attr.HTTP_ROUTE]: route,
      [Attr.NETWORK_PROTOCOL_VERSION]: req.httpVersionMajor === 2 ? "2" : req.httpVersion,
      ...(typeof userAgent === "string" ? { [Attr.USER_AGENT]: userAgent } : {}),
    },
    statusOf,
  };
}
