import { cors as connectCors } from "@connectrpc/connect";
import { type Req, type Res, writeHead } from "./http-types.ts";

/** Paths whose preflight may also allow the OpenAI SDKs' own request headers. */
const OPENAI_PATH_PREFIX = "/v1/";
// The official OpenAI SDKs send these from browsers (dangerouslyAllowBrowser); the set changes
// between SDK versions, so they are matched by prefix rather than listed.
const OPENAI_SDK_HEADER = /^(x-stainless-[a-z0-9-]+|openai-[a-z0-9-]+)$/;

/** Lower-cased, without duplicates (Connect's lists use canonical capitalisation). */
function headerList(names: readonly string[]): readonly string[] {
  return [...new Set(names.map((n) => n.toLowerCase()))];
}

/** Headers a browser script may send: Connect's, trace context, and the API key. */
export const CORS_ALLOWED_HEADERS: readonly string[] = headerList([...connectCors.allowedHeaders, "authorization", "traceparent", "tracestate"]);

/** Headers a browser script may read: Connect's, gRPC status, Shoal's timings, retry hints. */
export const CORS_EXPOSED_HEADERS: readonly string[] = headerList([
  ...connectCors.exposedHeaders,
  "shoal-queue-ms",
  "shoal-tokenize-ms",
  "shoal-inference-ms",
  "shoal-total-ms",
  "shoal-worker",
  "retry-after",
  "retry-after-ms",
  // Connect unary calls carry trailers as "trailer-" prefixed headers.
  "trailer-retry-after",
  "trailer-retry-after-ms",
]);

const PREFLIGHT_MAX_AGE_S = 7_200;

/** The gateway's CORS policy for every path (Connect routes, /v1/embeddings, the console). */
export interface Cors {
  /**
   * Sets the CORS response headers for an allowed origin. Answers a preflight (OPTIONS with
   * Access-Control-Request-Method) completely and returns true; otherwise returns false and the
   * request continues to its route.
   */
  handle(req: Req, res: Res): boolean;
}

/** A CORS policy allowing `origins` (exact origins, or `*` for any). */
export function createCors(origins: readonly string[]): Cors {
  const any = origins.includes("*");
  const allowed = new Set(origins.map((o) => o.toLowerCase()));
  const exposed = CORS_EXPOSED_HEADERS.join(", ");
  const allowedHeaders = new Set(CORS_ALLOWED_HEADERS);

  return {
    handle(req, res) {
      const origin = header(req, "origin");
      const preflight = req.method === "OPTIONS" && origin !== undefined && header(req, "access-control-request-method") !== undefined;
      // Responses differ by Origin unless every origin gets the same "*".
      if (!any) res.setHeader("vary", "Origin");
      if (origin === undefined) return false;
      const ok = any || allowed.has(origin.toLowerCase());
      if (!ok) {
        if (!preflight) return false; // the browser blocks the response without our headers
        writeHead(res, 403, { "content-type": "text/plain" });
        res.end(`origin ${origin} is not allowed (SHOAL_CORS_ORIGINS)\n`);
        return true;
      }
      res.setHeader("access-control-allow-origin", any ? "*" : origin);
      if (!preflight) {
        res.setHeader("access-control-expose-headers", exposed);
        return false;
      }
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const extra = (header(req, "access-control-request-headers") ?? "")
        .split(",")
        .map((h) => h.trim().toLowerCase())
        .filter((h) => h !== "" && !allowedHeaders.has(h) && path.startsWith(OPENAI_PATH_PREFIX) && OPENAI_SDK_HEADER.test(h));
      writeHead(res, 204, {
        "access-control-allow-methods": connectCors.allowedMethods.join(", "),
        "access-control-allow-headers": [...CORS_ALLOWED_HEADERS, ...extra].join(", "),
        "access-control-max-age": String(PREFLIGHT_MAX_AGE_S),
      });
      res.end();
      return true;
    },
  };
}

function header(req: Req, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
