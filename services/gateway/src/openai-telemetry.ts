import { AsyncLocalStorage } from "node:async_hooks";
import type { TLSSocket } from "node:tls";
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { Code } from "@connectrpc/connect";
import { Attr, shoalTracer } from "@shoal/common";
import { principalKey } from "./auth.ts";
import { echo, toConnectError } from "./errors.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";
import { laneName, servedLane } from "./lanes.ts";
import { createOpenAiEmbeddings, OPENAI_EMBEDDINGS_PATH, type OpenAiEmbeddingsDeps } from "./openai-embeddings.ts";
import { type Req, type Res } from "./http-types.ts";


/** The `method` label of the OpenAI endpoint in `shoal_gateway_requests_total` and the latency histogram. */
export const OPENAI_EMBEDDINGS_METHOD = "OpenAI.Embeddings";

export interface OpenAiTelemetryDeps {
  /** `shoal.gateway.instance` on the span, as on the Connect RPCs' spans. */
  readonly instanceId: string;
  readonly metrics: GatewayMetrics;
  /** Model ids outside the catalog are labelled "unknown" (as rpcMetrics does). */
  readonly isKnownModel: (id: string) => boolean;
}

/** What one call learns on its way through the endpoint, for its span and its metrics. */
interface CallRecord {
  /** The model the request names (raw), once the request reached Embed. */
  model?: string;
  lane?: string;
  tenant?: string;
  /** Connect code name ("ok" on success) from the key check or Embed; else derived from the HTTP status. */
  code?: string;
  /** The error message when Embed failed. */
  message?: string;
  inputs?: number;
  /** Settles when Embed does; set while it runs. */
  embedding?: Promise<unknown>;
}

/** The record of the call whose handler is running (AsyncLocalStorage: works with tracing off too). */
const calls = new AsyncLocalStorage<CallRecord>();

const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]);

/** Connect code for a response the endpoint produced itself (nothing threw a ConnectError). */
function codeForStatus(status: number): string {
  if (status < 400) return "ok";
  switch (status) {
    case 400:
    case 405:
    case 415:
      return Code[Code.InvalidArgument];
    case 401:
      return Code[Code.Unauthenticated];
    case 403:
      return Code[Code.PermissionDenied];
    case 404:
      return Code[Code.NotFound];
    // 413 is what a Connect call over SHOAL_MAX_REQUEST_BYTES gets as ResourceExhausted.
    case 413:
    case 429:
      return Code[Code.ResourceExhausted];
    case 499:
      return Code[Code.Canceled];
    case 501:
      return Code[Code.Unimplemented];
    case 503:
      return Code[Code.Unavailable];
    case 504:
      return Code[Code.DeadlineExceeded];
    default:
      return status >= 500 ? Code[Code.Internal] : Code[Code.Unknown];
  }
}

function scheme(req: Req): string {
  if ("scheme" in req && typeof req.scheme === "string" && req.scheme !== "") return req.scheme;
  return (req.socket as Partial<TLSSocket> | null)?.encrypted === true ? "https" : "http";
}

/**
 * `POST /v1/embeddings` (createOpenAiEmbeddings) traced and measured like the Connect RPCs, which
 * get this from the traceRpc and rpcMetrics interceptors the endpoint does not pass through:
 *
 * - one SERVER span per request, named `POST /v1/embeddings` with the HTTP semantic conventions'
 *   attributes (`http.request.method`, `url.path`, `http.route`, `http.response.status_code`, …)
 *   and `shoal.model`, `shoal.tenant`, `shoal.inputs`, `shoal.gateway.instance`; a caller's
 *   `traceparent` is its parent, and it is the active span while Embed runs, so the job's
 *   producer span and everything downstream are its children. As the conventions say for server
 *   spans, 4xx responses leave the status unset; 5xx and requests whose caller left are errors.
 * - `shoal_gateway_requests_total` and `shoal_gateway_request_duration_seconds` with
 *   method="OpenAI.Embeddings", the model (or "unknown"/""), lane, the Connect code name of the
 *   outcome (the one Embed or the key check threw; else mapped from the HTTP status, e.g. 400 →
 *   InvalidArgument, 413 → ResourceExhausted) and the key's tenant.
 */
export function createObservedOpenAiEmbeddings(deps: OpenAiEmbeddingsDeps, telemetry: OpenAiTelemetryDeps): (req: Req, res: Res) => void {
  const authenticate = deps.authenticate;
  const handler = createOpenAiEmbeddings({
    ...deps,
    authenticate:
      authenticate &&
      ((authorization) => {
        const call = calls.getStore();
        try {
          const principal = authenticate(authorization);
          if (call && principal) call.tenant = principal.tenant;
          return principal;
        } catch (err) {
          if (call) call.code = Code[toConnectError(err).code];
          throw err;
        }
      }),
    embed: (req, ctx) => {
      const call = calls.getStore();
      if (!call) return deps.embed(req, ctx);
      const principal = ctx.values.get(principalKey);
      call.model = req.model;
      call.inputs = req.inputs.length;
      call.lane = laneName(servedLane(req.lane, principal?.lane));
      if (principal) call.tenant = principal.tenant;
      const running = (async () => {
        try {
          const out = await deps.embed(req, ctx);
          call.code = "ok";
          return out;
        } catch (err) {
          const e = toConnectError(err);
          call.code = Code[e.code];
          call.message = e.rawMessage;
          throw err;
        } finally {
          call.embedding = undefined;
        }
      })();
      call.embedding = running;
      return running;
    },
  });

  function finish(span: Span, call: CallRecord, res: Res, started: number): void {
    const status = res.headersSent ? res.statusCode : undefined;
    const code = call.code ?? (status === undefined ? Code[Code.Canceled] : codeForStatus(status));
    if (status !== undefined) span.setAttribute(Attr.HTTP_RESPONSE_STATUS_CODE, status);
    if (call.model !== undefined) span.setAttribute(Attr.MODEL, echo(call.model));
    if (call.inputs !== undefined) span.setAttribute(Attr.INPUTS, call.inputs);
    if (call.tenant !== undefined) span.setAttribute(Attr.TENANT, call.tenant);
    if (status === undefined) {
      // No response: the caller went away first.
      span.setAttribute(Attr.ERROR_TYPE, code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: call.message ?? "the caller went away before the response" });
    } else if (status >= 500) {
      span.setAttribute(Attr.ERROR_TYPE, String(status));
      span.setStatus({ code: SpanStatusCode.ERROR, ...(call.message !== undefined ? { message: call.message } : {}) });
    }
    span.end();

    const model = call.model === undefined ? "" : telemetry.isKnownModel(call.model) ? call.model : "unknown";
    const method = OPENAI_EMBEDDINGS_METHOD;
    telemetry.metrics.requests.inc({ method, model, lane: call.lane ?? "", code, tenant: call.tenant ?? "" });
    telemetry.metrics.duration.observe({ method, model, code }, (performance.now() - started) / 1000);
  }

  return (req, res) => {
    const started = performance.now();
    const raw = (req.method ?? "").toUpperCase();
    const method = HTTP_METHODS.has(raw) ? raw : "_OTHER";
    const userAgent = req.headers["user-agent"];
    const parent = propagation.extract(context.active(), req.headers);
    const span = shoalTracer().startSpan(
      `${method === "_OTHER" ? "HTTP" : method} ${OPENAI_EMBEDDINGS_PATH}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          [Attr.HTTP_REQUEST_METHOD]: method,
          ...(method === "_OTHER" ? { [Attr.HTTP_REQUEST_METHOD_ORIGINAL]: req.method ?? "" } : {}),
          [Attr.URL_PATH]: (req.url ?? OPENAI_EMBEDDINGS_PATH).split("?", 1)[0] ?? OPENAI_EMBEDDINGS_PATH,
          [Attr.URL_SCHEME]: scheme(req),
          [Attr.HTTP_ROUTE]: OPENAI_EMBEDDINGS_PATH,
          [Attr.NETWORK_PROTOCOL_VERSION]: req.httpVersionMajor === 2 ? "2" : req.httpVersion,
          ...(typeof userAgent === "string" ? { [Attr.USER_AGENT]: userAgent } : {}),
          [Attr.GATEWAY_INSTANCE]: telemetry.instanceId,
        },
      },
      parent,
    );
    const call: CallRecord = {};
    let done = false;
    const end = (): void => {
      if (done) return;
      done = true;
      finish(span, call, res, started);
    };
    // The response sent, or the connection gone first; in that case Embed may still be running
    // (it is told through its signal): the call ends when it does, as a Connect call would.
    res.once("finish", end);
    res.once("close", () => {
      if (call.embedding) call.embedding.then(end, end);
      else end();
    });
    calls.run(call, () => context.with(trace.setSpan(parent, span), () => handler(req, res)));
  };
}
