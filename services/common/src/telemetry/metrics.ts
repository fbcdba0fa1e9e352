import { collectDefaultMetrics, Registry } from "prom-client";
import { registerEventLoopDelay } from "./event-loop-delay.ts";

/**
 * A Prometheus registry with Node's default metrics (event-loop lag, GC, memory, CPU) and the
 * event-loop delay histogram (event-loop-delay.ts), labelled `service="<service>"`; services add
 * their own metrics to it and serve it on `/metrics`.
 */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
  registerEventLoopDelay(registry);
  return registry;
}

export { Counter, Gauge, Histogram, type Registry } from "prom-client";
