import { Counter, createMetricsRegistry, Gauge, Histogram, type Registry } from "@shoal/common";

/** The gateway's Prometheus metrics. */
export interface GatewayMetrics {
  readonly registry: Registry;
  readonly requests: Counter<"method" | "model" | "lane" | "code" | "tenant">;
  readonly duration: Histogram<"method" | "model" | "code">;
  readonly inFlight: Gauge;
  readonly admissionRejections: Counter<"lane" | "reason">;
  readonly abandonedJobs: Counter<"how">;
  readonly resultsDropped: Counter;
  readonly resultsAfterUnavailable: Counter;
  readonly directResults: Counter;
  readonly recordsRejected: Counter<"reason">;
  readonly statusRejected: Counter<"reason">;
  readonly statusEntries: Gauge;
  readonly queueLag: Gauge<"pool" | "lane">;
  readonly dispatched: Counter<"pool" | "worker">;
  readonly rescued: Counter<"worker">;
  /** Embedding cache (docs/cache.md), per distinct text of a call: answered from it, computed, joined to a computation in flight. */
  readonly embedCacheHits: Counter;
  readonly embedCacheMisses: Counter;
  readonly embedCacheJoins: Counter;
  readonly embedCacheEvictions: Counter;
  readonly embedCacheBytes: Gauge;
  readonly embedCacheEntries: Gauge;
}

/**
 * @param inFlight read at scrape time: calls waiting for a result
 * @param lag read at scrape time: records waiting per `<pool>/<lane>` (the lane-lag monitor's map)
 * @param statusEntries read at scrape time: worker status entries held
 */
export function createGatewayMetrics(
  inFlight: () => number,
  lag: () => ReadonlyMap<string, number> = () => new Map(),
  statusEntries: () => number = () => 0,
  /** Read at scrape time: the embedding cache's bytes and entries (zeros when it is off). */
  embedCache: () => { bytes: number; entries: number } = () => ({ bytes: 0, entries: 0 }),
): GatewayMetrics {
  const registry = createMetricsRegistry("gateway");
  return {
    registry,
    requests: new Counter({
      name: "shoal_gateway_requests_total",
      help: "RPCs answered, by method, model, lane, Connect code and API key tenant",
      labelNames: ["method", "model", "lane", "code", "tenant"],
      registers: [registry],
    }),
    duration: new Histogram({
      name: "shoal_gateway_request_duration_seconds",
      help: "RPC latency at the gateway",
      labelNames: ["method", "model", "code"],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    inFlight: new Gauge({
      name: "shoal_gateway_inflight_jobs",
      help: "Jobs enqueued and not yet answered",
      registers: [registry],
      collect() {
        this.set(inFlight());
      },
    }),
    admissionRejections: new Counter({
      name: "shoal_gateway_admission_rejections_total",
      help: "Requests refused with ResourceExhausted by admission control",
      labelNames: ["lane", "reason"],
      registers: [registry],
    }),
    dispatched: new Counter({
      name: "shoal_gateway_dispatched_jobs_total",
      help: "Jobs routed by this gateway (SHOAL_DISPATCH other than shared), by pool and worker picked ('' = the pool's shared topic)",
      labelNames: ["pool", "worker"],
      registers: [registry],
    }),
    rescued: new Counter({
      name: "shoal_gateway_rescued_jobs_total",
      help: "Routed jobs written again to the shared topic because their worker went away before answering",
      labelNames: ["worker"],
      registers: [registry],
    }),
    abandonedJobs: new Counter({
      name: "shoal_gateway_abandoned_jobs_total",
      help: "Calls that ended without their result (caller gone, deadline), by what became of the job: not_sent (the caller left before it was produced), withdrawn (taken back before it went out), cancel_sent",
      labelNames: ["how"],
      registers: [registry],
    }),
    resultsDropped: new Counter({
      name: "shoal_gateway_results_dropped_total",
      help: "Results nobody waited for (duplicates, or the caller left)",
      registers: [registry],
    }),
    resultsAfterUnavailable: new Counter({
      name: "shoal_gateway_results_after_unavailable_total",
      help: "Results for jobs whose call was answered Unavailable while their record's fate was unknown (the work ran unseen; the cancel sent came too late)",
      registers: [registry],
    }),
    directResults: new Counter({
      name: "shoal_gateway_direct_results_total",
      help: "Results workers handed straight to this gateway (not through its reply topic)",
      registers: [registry],
    }),
    recordsRejected: new Counter({
      name: "shoal_gateway_records_rejected_total",
      help: "Results refused before reaching any call (reason: signature on the reply topic; direct_*: by the direct-reply listener)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    statusRejected: new Counter({
      name: "shoal_gateway_status_records_rejected_total",
      help: "Worker status records refused (reason: signature, malformed, capacity — a new worker id past SHOAL_MAX_WORKERS)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    statusEntries: new Gauge({
      name: "shoal_gateway_status_entries",
      help: "Worker status entries held (live, or expired and not yet swept); at most SHOAL_MAX_WORKERS",
      registers: [registry],
      collect() {
        this.set(statusEntries());
      },
    }),
    embedCacheHits: new Counter({
      name: "shoal_gateway_embed_cache_hits_total",
      help: "Texts of Embed calls answered from the embedding cache (each distinct text of a call counted once)",
      registers: [registry],
    }),
    embedCacheMisses: new Counter({
      name: "shoal_gateway_embed_cache_misses_total",
      help: "Texts of Embed calls neither cached nor in flight: computed by the call's own job",
      registers: [registry],
    }),
    embedCacheJoins: new Counter({
      name: "shoal_gateway_embed_cache_inflight_joins_total",
      help: "Texts of Embed calls that waited for another call's job computing the same text instead of sending their own",
      registers: [registry],
    }),
    embedCacheEvictions: new Counter({
      name: "shoal_gateway_embed_cache_evictions_total",
      help: "Embedding cache entries evicted (least recently used) to stay within SHOAL_EMBED_CACHE_BYTES",
      registers: [registry],
    }),
    embedCacheBytes: new Gauge({
      name: "shoal_gateway_embed_cache_bytes",
      help: "Bytes the embedding cache holds (vectors and keys, as counted against SHOAL_EMBED_CACHE_BYTES)",
      registers: [registry],
      collect() {
        this.set(embedCache().bytes);
      },
    }),
    embedCacheEntries: new Gauge({
      name: "shoal_gateway_embed_cache_entries",
      help: "Texts the embedding cache holds",
      registers: [registry],
      collect() {
        this.set(embedCache().entries);
      },
    }),
    // The autoscaling signal for share pools (KEDA's Prometheus scaler): a share group has no
    // committed offsets, so consumer-group lag scalers see nothing there.
    queueLag: new Gauge({
      name: "shoal_gateway_queue_lag_records",
      help: "Jobs waiting in a pool's lane (records not yet acknowledged by the share group, or past the consumer group's commits), at the last lag poll",
      labelNames: ["pool", "lane"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [key, records] of lag()) {
          const cut = key.lastIndexOf("/");
          this.set({ pool: key.slice(0, cut), lane: key.slice(cut + 1) }, records);
        }
      },
    }),
  };
}
