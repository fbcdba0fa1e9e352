import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { laneName, servedLane } from "@shoal/common";
import { principalKey } from "./auth.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";
import { httpRouteKey } from "./http-route.ts";

/**
 * Counts and times every RPC by method, model, lane, final code and tenant. Model ids outside the
 * catalog are labelled "unknown" so random names cannot blow up the label set; tenants come from
 * the configured API keys ("" when the call has none). A call through a plain-HTTP route
 * ({@link httpRouteKey}) is labelled with the route's method name (`OpenAI.Embeddings`).
 *
 * The labels are read from the request when the call ends: a plain-HTTP route enters the chain
 * before its body is read (so the key check comes first) and fills the request once it has parsed
 * the body. A call that names no model (or was refused before its body was read) has neither
 * model nor lane label.
 */
export function rpcMetrics(metrics: GatewayMetrics, isKnownModel: (id: string) => boolean): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    let code = "ok";
    try {
      return await next(req);
    } catch (err) {
      code = Code[ConnectError.from(err).code] ?? "unknown";
      throw err;
    } finally {
      const message = (req.stream ? undefined : req.message) as { model?: unknown; lane?: unknown } | undefined;
      const named = typeof message?.model === "string" && message.model !== "";
      const model = typeof message?.model === "string" && named ? (isKnownModel(message.model) ? message.model : "unknown") : "";
      const method = req.contextValues.get(httpRouteKey)?.metricsMethod ?? req.method.name;
      const principal = req.contextValues.get(principalKey);
      // A call that names no lane takes its API key's default lane.
      const lane = named && typeof message?.lane === "number" ? laneName(servedLane(message.lane, principal?.lane)) : "";
      metrics.requests.inc({ method, model, lane, code, tenant: principal?.tenant ?? "" });
      metrics.duration.observe({ method, model, code }, (performance.now() - started) / 1000);
    }
  };
}
