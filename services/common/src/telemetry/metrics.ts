import { collectDefaultMetrics, Registry } from "prom-client";

/**
 * A Prometheus registry with Node's default metrics (event-loop lag, GC, memory, CPU), labelled
 * `service="<service>"`; services add their own metrics to it and serve it on `/metrics`.
 */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
  return registry;
}

export { Counter, Gauge, Histogram, type Registry } from "prom-client";
