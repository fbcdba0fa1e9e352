import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Attr, shoalTracer } from "@shoal/common";
import { principalKey } from "./auth.ts";

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

/**
 * A SERVER span per RPC (http2 is not auto-instrumented, so Connect calls are traced here). A
 * caller that sends `traceparent` owns the root; otherwise the span starts a trace. Must be the
 * outermost interceptor, so it sees the final, mapped error code.
 */
export function traceRpc(instanceId: string): Interceptor {
  return (next) => async (req) => {
    const parent = propagation.extract(context.active(), req.header, headerGetter);
    const system = rpcSystem(req.header.get("content-type"));
    const span = shoalTracer().startSpan(
      `${req.service.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
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
      if (system !== "connect_rpc") span.setAttribute(Attr.RPC_GRPC_STATUS_CODE, 0);
      return res;
    } catch (err) {
      const e = ConnectError.from(err);
      if (system === "connect_rpc") span.setAttribute(Attr.RPC_CONNECT_ERROR_CODE, Code[e.code]);
      else span.setAttribute(Attr.RPC_GRPC_STATUS_CODE, e.code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: e.rawMessage });
      throw err;
    } finally {
      const tenant = req.contextValues.get(principalKey)?.tenant;
      if (tenant !== undefined) span.setAttribute(Attr.TENANT, tenant);
      span.end();
    }
  };
}
