import type { CatalogModel } from "@shoal/common";
import type { ComputeGate } from "../batching/compute-gate.ts";
import type { RunForecast } from "../batching/run-forecast.ts";
import type { WorkerConfig } from "../config.ts";
import type { WorkerMetrics } from "../telemetry/worker-metrics.ts";
import type { CooperativeQueue } from "./cooperative-queue.ts";
import type { ModelRunnerOptions } from "./model-runner.ts";

export interface RunnerOptionsDeps {
  readonly config: WorkerConfig;
  readonly gate: ComputeGate;
  /** Told about every model call (the take-ahead's forecast); none: nobody asks. */
  readonly forecast?: RunForecast;
  readonly tokenizeQueue: CooperativeQueue;
  readonly metrics: WorkerMetrics;
  readonly isCancelled: (jobId: string) => boolean;
}

/** A model's runner options: its catalog batching over the worker's defaults, and batch metrics. */
export function runnerOptionsFor(deps: RunnerOptionsDeps): (model: CatalogModel) => ModelRunnerOptions {
  const { config, metrics } = deps;
  return (model) => {
    const maxBatchTokens = model.batching.maxBatchTokens ?? config.batchMaxTokens;
    return {
      batching: {
        policy: model.batching.policy ?? config.batchPolicy,
        maxBatchTokens,
        maxBatchItems: model.batching.maxBatchItems ?? config.batchMaxItems,
        maxWaitMs: model.batching.maxWaitMs ?? config.batchMaxWaitMs,
        concurrency: config.inferenceThreads,
        interactiveSlots: config.interactiveThreads,
        batchLaneShare: config.batchLaneSharePercent / 100,
        batchLaneAgingMs: config.batchLaneAgingMs,
      },
      perCallOverheadTokens: config.perCallOverheadTokens,
      isCancelled: deps.isCancelled,
      gate: deps.gate,
      ...(deps.forecast ? { forecast: deps.forecast } : {}),
      closeOnGrant: config.batchCloseOnGrant,
      tokenizeQueue: deps.tokenizeQueue,
      inputLimits: { maxInputs: config.maxInputs, maxInputChars: config.maxInputChars, maxRequestBytes: config.maxRequestBytes },
      batchLaneCallTokens: config.batchLaneCallTokens,
      onBatch(b) {
        const labels = { model: b.model };
        metrics.batches.inc({ model: b.model, reason: b.reason });
        metrics.batchItems.observe(labels, b.items);
        metrics.batchTokens.observe(labels, b.usefulTokens);
        metrics.batchPadding.observe(labels, b.paddedTokens > 0 ? 1 - b.usefulTokens / b.paddedTokens : 0);
        metrics.batchFill.observe(labels, Math.min(1, b.usefulTokens / maxBatchTokens));
        metrics.inferenceSeconds.observe(labels, b.inferenceMs / 1000);
        metrics.tokens.inc(labels, b.usefulTokens);
        metrics.paddedTokens.inc(labels, b.paddedTokens);
        metrics.itemsComputed.inc(labels, b.items);
      },
    };
  };
}
