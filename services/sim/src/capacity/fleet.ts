/**
 * The nine-model fleet of the capacity model (issue #53): each model's share of the jobs and of the
 * tokens, and the mean job, measured on the contract-review agent's trace (trace.ts: Zipf s = 1.1,
 * 1–4 calls per request, log-normal lengths) so that the capacity table and the dispatch benchmarks
 * describe the same load.
 */
import type { FleetModel } from "@shoal/common";
import { CONTRACT_REVIEW_MODELS, generateTrace, type TraceModel } from "../trace.ts";

/** A fleet: its models' shares and the mean job's tokens. */
export interface Fleet {
  readonly models: readonly FleetModel[];
  readonly meanJobTokens: number;
}

/** Shares measured on `requests` agent requests of a seeded trace (deterministic). */
export function traceFleet(
  opts: { readonly models?: readonly TraceModel[]; readonly requests?: number; readonly seed?: number; readonly zipfS?: number } = {},
): Fleet {
  const trace = generateTrace({
    seed: opts.seed ?? 1,
    requests: opts.requests ?? 50_000,
    requestsPerSecond: 100,
    ...(opts.zipfS !== undefined ? { zipfS: opts.zipfS } : {}),
    models: opts.models ?? CONTRACT_REVIEW_MODELS,
  });
  const jobs = trace.models.map(() => 0);
  const tokens = trace.models.map(() => 0);
  for (const j of trace.jobs) {
    jobs[j.model]! += 1;
    tokens[j.model]! += j.totalTokens;
  }
  const totalJobs = trace.jobs.length;
  const totalTokens = tokens.reduce((a, b) => a + b, 0);
  return {
    models: trace.models.map((m, i) => ({ id: m.id, jobShare: jobs[i]! / totalJobs, tokenShare: tokens[i]! / totalTokens })),
    meanJobTokens: totalTokens / totalJobs,
  };
}

/** `n` models of equal share (a fleet other than the agent's): the CLI's `--models` other than 9. */
export function uniformFleet(n: number, meanJobTokens: number): Fleet {
  return { models: Array.from({ length: n }, (_, i) => ({ id: `model-${i + 1}`, jobShare: 1 / n, tokenShare: 1 / n })), meanJobTokens };
}

/** One H200's useful tokens per second on mixed lengths (README "Measured on one NVIDIA H200", docs/gpu/h200-2026-12-04.txt). */
export const H200_USEFUL_TOKENS_PER_SECOND = 4_613_282;
