import { type Histogram as NodeHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import { Histogram, type Registry } from "prom-client";

/** Name of the event-loop delay histogram every service exports (issue #52). */
export const EVENT_LOOP_DELAY_METRIC = "nodejs_eventloop_delay_seconds";

/** Bucket bounds, seconds: fine below 50 ms, where "a request held the loop" starts to show. */
export const EVENT_LOOP_DELAY_BUCKETS: readonly number[] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5];

/** The monitor's timer period. */
const RESOLUTION_MS = 10;
/** Samples are folded into the buckets this often (and at each scrape): about 100 at a time. */
const FOLD_EVERY_MS = 1_000;

/**
 * How many of the `n` samples in `h` are at most `boundNs`. HDR's value at percentile
 * 100·(k − ½)/n is its k-th smallest sample (to HDR's 3 significant digits), so a binary search
 * over k finds the count in log₂ n look-ups.
 */
function countAtOrBelow(h: NodeHistogram, n: number, boundNs: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (h.percentile((100 * (mid - 0.5)) / n) <= boundNs) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Registers `nodejs_eventloop_delay_seconds`, a Prometheus histogram of how late the event loop
 * ran a timer due every 10 ms (`perf_hooks.monitorEventLoopDelay`): a request that holds the loop
 * for 80 ms shows as a sample in the 0.1 bucket. prom-client's own `nodejs_eventloop_lag_*` are
 * gauges reset at every scrape, so a stall between two scrapes is lost to rate() and cannot be
 * summed across replicas; a histogram can be (`histogram_quantile` over `rate(..._bucket)`).
 *
 * The monitor keeps an HDR histogram of the timer's periods; every second and at each scrape they
 * are folded into the Prometheus buckets (period − 10 ms = delay) and the monitor is reset. Bucket
 * counts are exact; `_sum` counts each sample at the median of its bucket's samples.
 * @returns stops the monitor (tests)
 */
export function registerEventLoopDelay(registry: Registry): () => void {
  const monitor = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  monitor.enable();
  const periodNs = RESOLUTION_MS * 1e6;
  const bounds = [...EVENT_LOOP_DELAY_BUCKETS, Number.POSITIVE_INFINITY];
  const histogram = new Histogram({
    name: EVENT_LOOP_DELAY_METRIC,
    help: `Event-loop delay: how late a timer due every ${RESOLUTION_MS} ms ran (perf_hooks.monitorEventLoopDelay)`,
    buckets: [...EVENT_LOOP_DELAY_BUCKETS],
    registers: [registry],
    collect: () => fold(),
  });
  function fold(): void {
    const n = monitor.count;
    if (n === 0) return;
    let below = 0;
    for (const bound of bounds) {
      const upTo = bound === Number.POSITIVE_INFINITY ? n : countAtOrBelow(monitor, n, periodNs + bound * 1e9);
      const inBucket = upTo - below;
      if (inBucket > 0) {
        const median = monitor.percentile((100 * (below + Math.ceil(inBucket / 2) - 0.5)) / n);
        const seconds = Math.max(0, median - periodNs) / 1e9;
        for (let i = 0; i < inBucket; i++) histogram.observe(seconds);
      }
      below = upTo;
    }
    monitor.reset();
  }
  const timer = setInterval(fold, FOLD_EVERY_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    monitor.disable();
  };
}
