import { Counter, createMetricsRegistry, Gauge, Histogram, type Registry } from "@shoal/common";

/** The worker's Prometheus metrics. */
export interface WorkerMetrics {
  readonly registry: Registry;
  readonly jobs: Counter<"model" | "status">;
  readonly recordsRejected: Counter;
  readonly resultsDropped: Counter<"reason">;
  readonly resultsSent: Counter<"via">;
  readonly directFallbacks: Counter<"why">;
  readonly registrationsRejected: Counter<"reason">;
  readonly unprovenLapses: Counter;
  /** A computed job's wait before its batch: `queue` (in Kafka) and `worker` (taken → batch start). */
  readonly jobWaitSeconds: Histogram<"where">;
  /** Share intake: jobs taken and given straight back unrun (`busy`: for an idle worker; `stopping`). */
  readonly shareGivenBack: Counter<"why">;
  readonly batches: Counter<"model" | "reason">;
  readonly batchItems: Histogram<"model">;
  readonly batchTokens: Histogram<"model">;
  readonly batchPadding: Histogram<"model">;
  readonly batchFill: Histogram<"model">;
  readonly inferenceSeconds: Histogram<"model">;
  readonly tokens: Counter<"model">;
  readonly paddedTokens: Counter<"model">;
  readonly itemsComputed: Counter<"model">;
  readonly consumerLag: Gauge<"topic" | "partition">;
  readonly modelsResident: Gauge;
  readonly modelLoads: Counter<"model">;
  readonly coldStartSeconds: Gauge<"model">;
  readonly modelEvictions: Counter<"model">;
  readonly modelLoadFailures: Counter<"model">;
  readonly residencyThrash: Counter<"model">;
  readonly memoryUsedBytes: Gauge;
  readonly memoryBudgetBytes: Gauge;
  readonly jobsWaitingForLoad: Gauge;
  readonly retries: Counter<"model">;
  readonly deadLetters: Counter<"reason">;
  /** 1, labelled with what runs the models (`cpu`, `cuda`, `simulated:<profile>`). */
  readonly runtimeInfo: Gauge<"runtime">;
  /** Simulated accelerators only: the device's timer overshoot, read at scrape time once a source is set. */
  readonly simulatedLag: SimulatedLagGauges;
}

/** Timer-lag gauges of a simulated device (issue #16); nothing is exported until `watch` is called. */
export interface SimulatedLagGauges {
  watch(source: () => { readonly maxLagMs: number; readonly meanLagMs: number; readonly totalLagFraction: number }): void;
}

/** @param inFlight read at scrape time: records pulled and not yet answered */
export function createWorkerMetrics(inFlight: () => number): WorkerMetrics {
  const registry = createMetricsRegistry("worker");
  const registers = [registry];
  new Gauge({
    name: "shoal_worker_inflight_jobs",
    help: "Job records pulled and not yet answered",
    registers,
    collect() {
      this.set(inFlight());
    },
  });
  let lagSource: Parameters<SimulatedLagGauges["watch"]>[0] | undefined;
  new Gauge({
    name: "shoal_worker_simulated_timer_lag_seconds",
    help: "Simulated accelerator: how late its timers fired (max, mean); compare with service times",
    labelNames: ["stat"],
    registers,
    collect() {
      if (lagSource === undefined) return;
      const lag = lagSource();
      this.set({ stat: "max" }, lag.maxLagMs / 1000);
      this.set({ stat: "mean" }, lag.meanLagMs / 1000);
    },
  });
  new Gauge({
    name: "shoal_worker_simulated_timer_lag_ratio",
    help: "Simulated accelerator: total timer lag / total planned service time",
    registers,
    collect() {
      if (lagSource !== undefined) this.set(lagSource().totalLagFraction);
    },
  });
  const ratio = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];
  return {
    registry,
    jobs: new Counter({ name: "shoal_worker_jobs_total", help: "Jobs answered, by model and status", labelNames: ["model", "status"], registers }),
    recordsRejected: new Counter({ name: "shoal_worker_records_rejected_total", help: "Undecodable job records skipped", registers }),
    resultsSent: new Counter({
      name: "shoal_worker_results_sent_total",
      help: "Results on their way to the caller's gateway (via: direct — handed straight to it; topic — through its reply topic)",
      labelNames: ["via"],
      registers,
    }),
    directFallbacks: new Counter({
      name: "shoal_worker_direct_reply_fallbacks_total",
      help: "Results that went through the reply topic after the direct path could not take them (why: unreachable, timeout, misdirected, refused, paused)",
      labelNames: ["why"],
      registers,
    }),
    resultsDropped: new Counter({
      name: "shoal_worker_results_dropped_total",
      help: "Results answered nowhere, the job acknowledged (reason: missing_reply_topic, unregistered_reply_topic — no live gateway registered it; the registry is on unless SHOAL_REPLY_REGISTRY=0)",
      labelNames: ["reason"],
      registers,
    }),
    registrationsRejected: new Counter({
      name: "shoal_worker_gateway_registrations_rejected_total",
      help: "Gateway reply-topic registrations refused (reason: signature, malformed, capacity — past SHOAL_MAX_GATEWAYS)",
      labelNames: ["reason"],
      registers,
    }),
    unprovenLapses: new Counter({
      name: "shoal_worker_reply_registrations_unproven_total",
      help: "Results sent to a reply topic whose registration lapsed by the clock while this worker had read nothing newer (it may be the one cut off)",
      registers,
    }),
    shareGivenBack: new Counter({
      name: "shoal_worker_share_given_back_total",
      help: "Share intake: jobs taken and released unrun (busy: a fetch begun idle brought it after another model's job was taken; stopping: the intake had paused; unservable: its model failed to load here and waits out a backoff)",
      labelNames: ["why"],
      registers,
    }),
    jobWaitSeconds: new Histogram({
      name: "shoal_worker_job_wait_seconds",
      help: "A computed job's wait before its batch started: in the queue (gateway enqueue → taken by this worker) and on the worker (taken → batch start)",
      labelNames: ["where"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    batches: new Counter({ name: "shoal_worker_batches_total", help: "Batches run, by close reason", labelNames: ["model", "reason"], registers }),
    batchItems: new Histogram({
      name: "shoal_worker_batch_items",
      help: "Texts per batch",
      labelNames: ["model"],
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers,
    }),
    batchTokens: new Histogram({
      name: "shoal_worker_batch_tokens",
      help: "Useful (unpadded) tokens per batch",
      labelNames: ["model"],
      buckets: [16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384],
      registers,
    }),
    batchPadding: new Histogram({
      name: "shoal_worker_batch_padding_fraction",
      help: "Padded share of the tokens computed per batch",
      labelNames: ["model"],
      buckets: ratio,
      registers,
    }),
    batchFill: new Histogram({
      name: "shoal_worker_batch_fill_ratio",
      help: "Useful tokens per batch / token budget",
      labelNames: ["model"],
      buckets: ratio,
      registers,
    }),
    inferenceSeconds: new Histogram({
      name: "shoal_worker_inference_seconds",
      help: "session.run time per batch",
      labelNames: ["model"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    tokens: new Counter({ name: "shoal_worker_tokens_total", help: "Useful tokens computed (rate = tokens/s)", labelNames: ["model"], registers }),
    paddedTokens: new Counter({
      name: "shoal_worker_padded_tokens_total",
      help: "Tokens run through the model including padding (useful fraction = tokens / padded tokens)",
      labelNames: ["model"],
      registers,
    }),
    itemsComputed: new Counter({ name: "shoal_worker_items_computed_total", help: "Texts run through the model", labelNames: ["model"], registers }),
    consumerLag: new Gauge({
      name: "shoal_worker_consumer_lag",
      help: "Records behind the high watermark at the last fetch",
      labelNames: ["topic", "partition"],
      registers,
    }),
    modelsResident: new Gauge({ name: "shoal_worker_models_resident", help: "Models loaded on this worker", registers }),
    modelLoads: new Counter({ name: "shoal_worker_model_loads_total", help: "Model loads", labelNames: ["model"], registers }),
    coldStartSeconds: new Gauge({ name: "shoal_worker_model_cold_start_seconds", help: "Time of the last load of a model", labelNames: ["model"], registers }),
    modelEvictions: new Counter({
      name: "shoal_worker_model_evictions_total",
      help: "Models unloaded to make room under the memory budget",
      labelNames: ["model"],
      registers,
    }),
    modelLoadFailures: new Counter({ name: "shoal_worker_model_load_failures_total", help: "Model loads that failed", labelNames: ["model"], registers }),
    residencyThrash: new Counter({
      name: "shoal_worker_residency_thrash_total",
      help: "Loads of a model evicted shortly before (load/evict churn: raise the budget or pin the model)",
      labelNames: ["model"],
      registers,
    }),
    memoryUsedBytes: new Gauge({ name: "shoal_worker_memory_used_bytes", help: "Estimated bytes of resident and loading models", registers }),
    memoryBudgetBytes: new Gauge({ name: "shoal_worker_memory_budget_bytes", help: "Memory budget for resident models", registers }),
    jobsWaitingForLoad: new Gauge({ name: "shoal_worker_jobs_waiting_for_load", help: "Jobs waiting for their model to load", registers }),
    retries: new Counter({ name: "shoal_worker_job_retries_total", help: "Failed jobs written to the retry topic", labelNames: ["model"], registers }),
    deadLetters: new Counter({
      name: "shoal_worker_dead_letters_total",
      help: "Records moved to the dead-letter topic: jobs that failed every attempt, records that are not jobs",
      labelNames: ["reason"],
      registers,
    }),
    runtimeInfo: new Gauge({
      name: "shoal_worker_runtime_info",
      help: "What runs the models: cpu, cuda or simulated:<profile>",
      labelNames: ["runtime"],
      registers,
    }),
    simulatedLag: {
      watch(source) {
        lagSource = source;
      },
    },
  };
}
