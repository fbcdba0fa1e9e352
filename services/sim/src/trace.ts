/**
 * Seeded open-loop traces of an agent's model calls (issue #16): the contract-review agent of the
 * talk calls nine small models; which ones follows a Zipf popularity, text lengths are
 * log-normal, arrivals come from a two-state Markov-modulated Poisson process (calm / burst), and
 * one agent request fans out to several models at once. Arrival times are fixed by the trace, so
 * every dispatch policy is offered exactly the same work. Same options and seed, same trace.
 */
import { mulberry32 } from "@shoal/models";

/** One model the agent calls. */
export interface TraceModel {
  readonly id: string;
  readonly task: "embed" | "rerank" | "classify";
  /** Most tokens per item (a text, or a query + document pair), special tokens included. */
  readonly maxTokens: number;
  /** Median of the log-normal item length, tokens. */
  readonly medianTokens: number;
  /** σ of ln(length). */
  readonly sigma: number;
  /** Items per call, uniform in [itemsMin, itemsMax] (texts to embed or classify, documents to rerank). */
  readonly itemsMin: number;
  readonly itemsMax: number;
}

/** The contract-review agent's models, most popular first (Zipf rank = position + 1). */
export const CONTRACT_REVIEW_MODELS: readonly TraceModel[] = [
  { id: "clause-classifier", task: "classify", maxTokens: 256, medianTokens: 48, sigma: 0.6, itemsMin: 1, itemsMax: 8 },
  { id: "query-embedder", task: "embed", maxTokens: 64, medianTokens: 14, sigma: 0.4, itemsMin: 1, itemsMax: 1 },
  { id: "clause-embedder", task: "embed", maxTokens: 256, medianTokens: 64, sigma: 0.7, itemsMin: 1, itemsMax: 16 },
  { id: "risk-reranker", task: "rerank", maxTokens: 256, medianTokens: 112, sigma: 0.5, itemsMin: 4, itemsMax: 16 },
  { id: "obligation-tagger", task: "classify", maxTokens: 256, medianTokens: 56, sigma: 0.6, itemsMin: 1, itemsMax: 8 },
  { id: "pii-detector", task: "classify", maxTokens: 128, medianTokens: 32, sigma: 0.7, itemsMin: 1, itemsMax: 4 },
  { id: "precedent-reranker", task: "rerank", maxTokens: 256, medianTokens: 144, sigma: 0.4, itemsMin: 4, itemsMax: 20 },
  { id: "jurisdiction-classifier", task: "classify", maxTokens: 128, medianTokens: 40, sigma: 0.5, itemsMin: 1, itemsMax: 2 },
  { id: "answer-scorer", task: "rerank", maxTokens: 256, medianTokens: 96, sigma: 0.5, itemsMin: 2, itemsMax: 6 },
];

/** Options of {@link generateTrace}. */
export interface TraceOptions {
  readonly seed: number;
  /** Agent requests to generate. */
  readonly requests: number;
  /** Long-run mean agent requests per second (calm and burst together). */
  readonly requestsPerSecond: number;
  /** Zipf exponent of model popularity: 0 uniform, 1.1 default, 1.5 steep. */
  readonly zipfS?: number;
  /** Models called by one request, uniform in [fanOutMin, fanOutMax], distinct, by popularity. */
  readonly fanOutMin?: number;
  readonly fanOutMax?: number;
  /** Arrival rate in a burst ÷ calm rate (1: plain Poisson). */
  readonly burstFactor?: number;
  /** Mean sojourn in the calm and burst states, ms (exponential). */
  readonly calmMeanMs?: number;
  readonly burstMeanMs?: number;
  readonly models?: readonly TraceModel[];
}

/** One call to one model. */
export interface TraceJob {
  /** 0.. in arrival order. */
  readonly id: number;
  /** The agent request it belongs to. */
  readonly request: number;
  readonly arrivalMs: number;
  /** Index into `Trace.models`. */
  readonly model: number;
  /** Token length of each item. */
  readonly tokens: readonly number[];
  /** Σ tokens. */
  readonly totalTokens: number;
  /** Whether it arrived in the burst state. */
  readonly burst: boolean;
}

/** A generated trace. */
export interface Trace {
  readonly models: readonly TraceModel[];
  readonly jobs: readonly TraceJob[];
  readonly requests: number;
  /** Arrival of the last request, ms. */
  readonly durationMs: number;
  /** Time spent in the burst state up to the last arrival, ms. */
  readonly burstMs: number;
  /** Rates actually used, requests per second. */
  readonly calmRatePerSecond: number;
  readonly burstRatePerSecond: number;
}

/** Cumulative Zipf weights over `n` ranks with exponent `s`. */
export function zipfCdf(n: number, s: number): number[] {
  const w = Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  return w.map((x) => (acc += x / total));
}

/** Generates a trace; deterministic in its options. */
export function generateTrace(opts: TraceOptions): Trace {
  const models = opts.models ?? CONTRACT_REVIEW_MODELS;
  const zipfS = opts.zipfS ?? 1.1;
  const fanOutMin = opts.fanOutMin ?? 1;
  const fanOutMax = Math.min(opts.fanOutMax ?? 4, models.length);
  const burstFactor = opts.burstFactor ?? 4;
  const calmMeanMs = opts.calmMeanMs ?? 4_000;
  const burstMeanMs = opts.burstMeanMs ?? 1_000;
  if (!(opts.requestsPerSecond > 0)) throw new RangeError(`requestsPerSecond must be > 0 (got ${opts.requestsPerSecond})`);
  if (!(fanOutMin >= 1 && fanOutMin <= fanOutMax)) throw new RangeError(`need 1 <= fanOutMin <= fanOutMax <= models (got ${fanOutMin}..${fanOutMax})`);
  // The calm rate that makes the long-run mean the asked rate, given time shares of the states.
  const calmRate = (opts.requestsPerSecond * (calmMeanMs + burstMeanMs)) / (calmMeanMs + burstFactor * burstMeanMs);
  const burstRate = calmRate * burstFactor;
  const rand = mulberry32(opts.seed);
  const exp = (meanMs: number): number => -Math.log(1 - rand()) * meanMs;
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const cdf = zipfCdf(models.length, zipfS);
  const pickModel = (): number => {
    const u = rand();
    const i = cdf.findIndex((c) => u < c);
    return i < 0 ? models.length - 1 : i;
  };

  const jobs: TraceJob[] = [];
  let t = 0;
  let burst = false;
  let stateEnds = exp(calmMeanMs);
  let burstMs = 0;
  for (let request = 0; request < opts.requests; request++) {
    // Memoryless arrivals: when the state changes before the next arrival, draw again from there.
    for (;;) {
      const gap = exp(1000 / (burst ? burstRate : calmRate));
      if (t + gap < stateEnds) {
        if (burst) burstMs += gap;
        t += gap;
        break;
      }
      if (burst) burstMs += stateEnds - t;
      t = stateEnds;
      burst = !burst;
      stateEnds = t + exp(burst ? burstMeanMs : calmMeanMs);
    }
    const fanOut = fanOutMin + Math.floor(rand() * (fanOutMax - fanOutMin + 1));
    const chosen = new Set<number>();
    while (chosen.size < fanOut) chosen.add(pickModel());
    for (const model of [...chosen].sort((a, b) => a - b)) {
      const m = models[model]!;
      const items = m.itemsMin + Math.floor(rand() * (m.itemsMax - m.itemsMin + 1));
      const tokens = Array.from({ length: items }, () => Math.max(3, Math.min(m.maxTokens, Math.round(m.medianTokens * Math.exp(m.sigma * normal())))));
      jobs.push({ id: jobs.length, request, arrivalMs: t, model, tokens, totalTokens: tokens.reduce((a, b) => a + b, 0), burst });
    }
  }
  return { models, jobs, requests: opts.requests, durationMs: t, burstMs, calmRatePerSecond: calmRate, burstRatePerSecond: burstRate };
}
