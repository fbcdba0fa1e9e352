import { context, propagation, trace, type Context, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { NodeSDK } from "@opentelemetry/sdk-node";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { IHeaders } from "kafkajs";

/** A started (or disabled) tracing pipeline. */
export interface Tracing {
  readonly enabled: boolean;
  /** Flushes pending spans and stops the exporter. Idempotent. */
  shutdown(): Promise<void>;
}

/**
 * Starts OpenTelemetry tracing exported over OTLP (protobuf over HTTP) when an OTLP endpoint is
 * configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `..._TRACES_ENDPOINT`) and `OTEL_SDK_DISABLED` is
 * not true; all standard `OTEL_*` variables apply (e.g. `OTEL_BSP_SCHEDULE_DELAY`). Spans are
 * created by Shoal itself (Connect interceptors, queue hops, batches): http2 and the queue are not
 * auto-instrumented the way one trace per request needs.
 */
export function startTracing(serviceName: string, instanceId: string, env: NodeJS.ProcessEnv = process.env): Tracing {
  const endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] ?? env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  if (!endpoint || /^true$/i.test(env["OTEL_SDK_DISABLED"] ?? "")) {
    return { enabled: false, shutdown: async () => undefined };
  }
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ "service.name": env["OTEL_SERVICE_NAME"] ?? serviceName, "service.instance.id": instanceId }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
    instrumentations: [],
  });
  sdk.start();
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown() {
      stopped ??= sdk.shutdown().catch(() => undefined);
      return stopped;
    },
  };
}

/** The tracer every Shoal component uses. */
export function shoalTracer(): Tracer {
  return trace.getTracer("shoal");
}

/** W3C trace context of `ctx` as Kafka record headers (empty when tracing is off). */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The trace context carried in a Kafka record's headers (ROOT when none). */
export function contextFromHeaders(headers: IHeaders | undefined): Context {
  const carrier: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers ?? {})) {
    const v = Array.isArray(value) ? value[0] : value;
    if (v !== undefined) carrier[key] = typeof v === "string" ? v : v.toString("latin1");
  }
  return propagation.extract(context.active(), carrier);
}
