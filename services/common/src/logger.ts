import { trace } from "@opentelemetry/api";
import { pino, type Logger } from "pino";

export type { Logger } from "pino";

/**
 * The one logger factory of every Shoal service: JSON lines on stdout, `service` on each line,
 * level from `LOG_LEVEL` (default `info`). Components take `logger.child({ component })`.
 */
export function createLogger(service: string, level = process.env["LOG_LEVEL"] ?? "info"): Logger {
  return pino({
    level,
    base: { service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Lines written inside a traced operation carry its ids, so logs and Jaeger join up.
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  });
}
