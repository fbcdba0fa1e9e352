import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { GatewayMetrics } from "./gateway-metrics.ts";

/**
 * Counts and times every RPC by method, model, lane and final code. Model ids outside the catalog
 * are labelled "unknown" so random names cannot blow up the label set.
 */
export function rpcMetrics(metrics: GatewayMetrics, isKnownModel: (id: string) => boolean): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const message = (req.stream ? undefined : req.message) as { model?: unknown; lane?: unknown } | undefined;
    const model = typeof message?.model === "string" ? (isKnownModel(message.model) ? message.model : "unknown") : "";
    const lane = message?.lane === Lane.BATCH ? "batch" : typeof message?.lane === "number" ? "interactive" : "";
    let code = "ok";
    try {
      return await next(req);
    } catch (err) {
      code = Code[ConnectError.from(err).code] ?? "unknown";
      throw err;
    } finally {
      const method = req.method.name;
      metrics.requests.inc({ method, model, lane, code });
      metrics.duration.observe({ method, model, code }, (performance.now() - started) / 1000);
    }
  };
}
