import { isConsolePath } from "./console-static.ts";
import type { Cors } from "./cors.ts";
import { COHERE_PATHS } from "./cohere-routes.ts";
import { OPENAI_EMBEDDINGS_PATH } from "./openai-embeddings.ts";
import { isBatchApiPath } from "./batch/batch-paths.ts";
import { TEI_PATHS } from "./tei-routes.ts";
import { clampTimeoutHeaders } from "./timeout-headers.ts";
import { refuseEarly, stopUploadAfterResponse } from "./early-refusal.ts";
import { type Req, type Res, writeHead } from "./http-types.ts";
import type { JsonMethod } from "./json-thread-protocol.ts";
import { largeJsonMethod } from "./large-json-calls.ts";

type Handler = (req: Req, res: Res) => void;

export interface HttpFrontRoutes {
  readonly cors: Cors;
  /** `POST /v1/embeddings`. */
  readonly openai: Handler;
  /** OpenAI's Batch API: `/v1/files…`, `/v1/batches…`; none: not served. */
  readonly batch?: Handler;
  /** Cohere's `/v1/embed`, `/v2/embed`, `/v1/rerank`, `/v2/rerank`; none: not served. */
  readonly cohere?: Handler;
  /** TEI's `/embed`, `/rerank`, `/tokenize`, `/info`, `/health`; none: not served. */
  readonly tei?: Handler;
  /** `/console/...`. */
  readonly console: Handler;
  /** Everything else: the Connect adapter (RPCs, then its own fallback for /healthz etc.). */
  readonly connect: Handler;
  /** Connect JSON inference calls with a large body (large-json-calls.ts); none: Connect's adapter serves them. */
  readonly largeJson?: (req: Req, res: Res, method: JsonMethod) => void;
  /** Why a request's `authorization` may not reach a keyed RPC (checked before its body is read); none: keys off. */
  readonly keyRefusal?: (authorization: string | undefined) => string | undefined;
  /** Told about each call refused here (`method`: the RPC's name), so the request metrics count it. */
  readonly onRefused?: (method: string) => void;
}

/** RPC paths that need a key (health and reflection stay open). */
const KEYED_PATH = /^\/shoal\.v1\./;

const WWW_AUTHENTICATE = { "www-authenticate": 'Bearer realm="shoal"' };

// gRPC and gRPC-Web with the JSON codec (application/grpc+json, application/grpc-web+json, ...).
const GRPC_JSON = /^application\/grpc(-web(-text)?)?\+json/i;

/**
 * The gateway's one request handler: CORS (answering preflights) for every path, then the few
 * plain-HTTP routes, then Connect. Connect's adapter only routes POST/GET to RPC paths, so
 * preflights and non-RPC routes are settled here, in front of it.
 */
export function createHttpFront(routes: HttpFrontRoutes): Handler {
  return (req, res) => {
    if ("stream" in req) stopUploadAfterResponse(req);
    if (routes.cors.handle(req, res)) return;
    const pathname = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (pathname === OPENAI_EMBEDDINGS_PATH) routes.openai(req, res);
    else if (routes.batch !== undefined && isBatchApiPath(pathname)) routes.batch(req, res);
    else if (routes.cohere !== undefined && COHERE_PATHS.has(pathname)) routes.cohere(req, res);
    else if (routes.tei !== undefined && TEI_PATHS.has(pathname)) routes.tei(req, res);
    else if (isConsolePath(pathname)) routes.console(req, res);
    else if (GRPC_JSON.test(req.headers["content-type"] ?? "")) {
      // Connect-ES 2.1 hangs a gRPC call whose error message holds a lone surrogate (its
      // encodeURIComponent of grpc-message throws), and V8's JSON parse errors quote the body in
      // a way that can split a surrogate pair. gRPC clients send protobuf; Connect JSON is served.
      writeHead(res, 415, {
        "content-type": "text/plain",
        "accept-post": "application/grpc, application/grpc+proto, application/grpc-web, application/grpc-web+proto, application/json, application/proto",
      });
      res.end("gRPC and gRPC-Web take the protobuf codec; use application/json for Connect JSON\n");
    } else if (routes.keyRefusal !== undefined && KEYED_PATH.test(pathname) && routes.keyRefusal(headerOf(req, "authorization")) !== undefined) {
      // Before the body is read (Connect-ES parses bodies before interceptors run); the rate and the
      // principal are still taken by the interceptor for recognised keys.
      refuseEarly(req, res, "unauthenticated", routes.keyRefusal(headerOf(req, "authorization")) ?? "", WWW_AUTHENTICATE);
      routes.onRefused?.(pathname.split("/")[2] ?? "unknown");
    } else {
      clampTimeoutHeaders(req.headers);
      const large = routes.largeJson === undefined ? undefined : largeJsonMethod(req, pathname);
      if (large !== undefined) routes.largeJson?.(req, res, large);
      else routes.connect(req, res);
    }
  };
}

function headerOf(req: Req, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
