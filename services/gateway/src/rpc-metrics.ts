import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { laneName, servedLane } from "@shoal/common";
import { principalKey } from "./auth.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";

/**
 * Counts and times every RPC by method, model, lane, final code and tenant. Model ids outside the
 * catalog are labelled "unknown" so random names cannot blow up the label set; tenants come from
 * the configured API keys ("" when the call has none).
 */
export function rpcMetrics(metrics: GatewayMetrics, isKnownModel: (id: string) => boolean): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const message = (req.stream ? undefined : req.message) as { model?: unknown; lane?: unknown } | undefined;
    const model = typeof message?.model === "string" ? (isKnownModel(message.model) ? message.model : "unknown") : "";
    let code = "ok";
    try {
      return await next(req);
    } catch (err) {
      code = Code[ConnectError.from(err).code] ?? "unknown";
      throw err;
    } finally {
      const method = req.method.name;
      const principal = req.contextValues.get(principalKey);
      // A call that names no lane takes its API key's default lane.
      const lane = typeof message?.lane === "number" ? laneName(servedLane(message.lane, principal?.lane)) : "";
      metrics.requests.inc({ method, model, lane, code, tenant: principal?.tenant ?? "" });
      metrics.duration.observe({ method, model, code }, (performance.now() - started) / 1000);
    }
  };
}
