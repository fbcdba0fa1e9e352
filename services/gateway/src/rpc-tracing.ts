import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Attr, shoalTracer } from "@shoal/common";
import { principalKey } from "./auth.ts";
import { echo } from "./errors.ts";
import { httpRouteKey, type HttpRoute } from "./http-route.ts";

const headerGetter = {
  keys: (h: Headers) => [...h.keys()],
  get: (h: Headers, key: string) => h.get(key) ?? undefined,
};

/** rpc.system of a request, from its content type. */
function rpcSystem(contentType: string | null): string {
  if (contentType?.startsWith("application/grpc-web")) return "grpc_web";
  if (contentType?.startsWith("application/grpc")) return "grpc";
  return "connect_rpc";
}

/** `shoal.model` and `shoal.inputs` of a request that names a model (read when the call ends: see rpcMetrics). */
function requestAttributes(span: Span, message: unknown): void {
  const m = message as { model?: unknown; inputs?: unknown } | undefined;
  if (typeof m?.model !== "string" || m.model === "") return;
  span.setAttribute(Attr.MODEL, echo(m.model));
  if (Array.isArray(m.inputs)) span.setAttribute(Attr.INPUTS, m.inputs.length);
}

/**
 * A SERVER span per RPC (http2 is not auto-instrumented, so Connect calls are traced here). A
 * caller that sends `traceparent` owns the root; otherwise the span starts a trace. Must be the
 * outermost interceptor, so it sees the final, mapped error code.
 *
 * A call that came through a plain-HTTP route ({@link httpRouteKey}: the OpenAI endpoint) is named
 * by its route and follows the HTTP semantic conventions instead: `http.response.status_code`; 4xx
 * leave the status unset, 5xx and calls whose caller left (no response) are errors.
 */
export function traceRpc(instanceId: string): Interceptor {
  return (next) => async (req) => {
    const parent = propagation.extract(context.active(), req.header, headerGetter);
    const route = req.contextValues.get(httpRouteKey);
    const system = rpcSystem(req.header.get("content-type"));
    const span = shoalTracer().startSpan(
      route?.spanName ?? `${req.service.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: route
          ? { ...route.attributes, [Attr.GATEWAY_INSTANCE]: instanceId }
          : {
              [Attr.RPC_SYSTEM]: system,
              [Attr.RPC_SERVICE]: req.service.typeName,
              [Attr.RPC_METHOD]: req.method.name,
              [Attr.GATEWAY_INSTANCE]: instanceId,
            },
      },
      parent,
    );
    try {
      const res = await context.with(trace.setSpan(parent, span), () => next(req));
      if (route) httpOutcome(span, route, undefined);
      else if (system !== "connect_rpc") span.setAttribute(Attr.RPC_GRPC_STATUS_CODE, 0);
      return res;
    } catch (err) {
      const e = ConnectError.from(err);
      if (route) httpOutcome(span, route, e);
      else {
        if (system === "connect_rpc") span.setAttribute(Attr.RPC_CONNECT_ERROR_CODE, Code[e.code]);
        else span.setAttribute(Attr.RPC_GRPC_STATUS_CODE, e.code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: e.rawMessage });
      }
      throw err;
    } finally {
      if (!req.stream) requestAttributes(span, req.message);
      const tenant = req.contextValues.get(principalKey)?.tenant;
      if (tenant !== undefined) span.setAttribute(Attr.TENANT, tenant);
      span.end();
    }
  };
}

/** The response status of a call through an HTTP route, as the HTTP semantic conventions record it. */
function httpOutcome(span: Span, route: HttpRoute, error: ConnectError | undefined): void {
  const status = route.statusOf(error);
  if (status === undefined) {
    // No response: the caller went away first.
    span.setAttribute(Attr.ERROR_TYPE, error ? Code[error.code] : Code[Code.Canceled]);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error?.rawMessage ?? "the caller went away before the response" });
    return;
  }
  span.setAttribute(Attr.HTTP_RESPONSE_STATUS_CODE, status);
  if (status >= 500) {
    span.setAttribute(Attr.ERROR_TYPE, String(status));
    span.setStatus({ code: SpanStatusCode.ERROR, ...(error ? { message: error.rawMessage } : {}) });
  }
}
