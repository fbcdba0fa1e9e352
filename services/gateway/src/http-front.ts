import type http from "node:http";
import type http2 from "node:http2";
import { isConsolePath } from "./console-static.ts";
import type { Cors } from "./cors.ts";
import { OPENAI_EMBEDDINGS_PATH } from "./openai-embeddings.ts";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;
type Handler = (req: Req, res: Res) => void;

export interface HttpFrontRoutes {
  readonly cors: Cors;
  /** `POST /v1/embeddings`. */
  readonly openai: Handler;
  /** `/console/...`. */
  readonly console: Handler;
  /** Everything else: the Connect adapter (RPCs, then its own fallback for /healthz etc.). */
  readonly connect: Handler;
}

/**
 * The gateway's one request handler: CORS (answering preflights) for every path, then the few
 * plain-HTTP routes, then Connect. Connect's adapter only routes POST/GET to RPC paths, so
 * preflights and non-RPC routes are settled here, in front of it.
 */
export function createHttpFront(routes: HttpFrontRoutes): Handler {
  return (req, res) => {
    if (routes.cors.handle(req, res)) return;
    const pathname = (req.url ?? "/").split("?", 1)[0] ?? "/";
    if (pathname === OPENAI_EMBEDDINGS_PATH) routes.openai(req, res);
    else if (isConsolePath(pathname)) routes.console(req, res);
    else routes.connect(req, res);
  };
}
