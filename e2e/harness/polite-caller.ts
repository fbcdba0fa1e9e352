/**
 * The adversarial suite's polite caller (issues #19, #52): one-text Embeds sent on a fixed
 * schedule while an attack runs, timed against the same caller's unloaded run. Each call is sent
 * at its scheduled time whether or not the one before has answered (an open loop, as independent
 * users send), and timed from that time: a 600 ms stall then shows in every call it overlaps, not
 * in the one call a sequential caller would have had in flight (coordinated omission, which hid
 * the tail of #52). The p99 is the nearest-rank 99th percentile of 200 calls (the third slowest).
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Client } from "@connectrpc/connect";
import type { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { histogramBuckets, histogramDelta, scrape, total } from "./prometheus.ts";
import type { ServiceProcess } from "./service-process.ts";
import { eventually } from "./wait.ts";

/** Calls per run and the interval between their scheduled starts: 4 s of calls. */
export const POLITE_CALLS = 200;
export const POLITE_INTERVAL_MS = 20;

/** The bounds under attack, as multiples of the unloaded run's p99 (#52's goal). */
export const P99_BOUND = 3;
export const SLOWEST_BOUND = 5;
/**
 * What attacks other than those held to the goal may add to it, ms: measured this way (an open
 * loop), several of them still cost the polite caller 100–250 ms on this 2-core machine (their
 * figures are in docs/benchmarks.md, "A huge request costs only its sender"); the allowance keeps
 * them guarded against stalls while that work is open.
 */
export const ALLOWANCE_MS = { p99: 200, slowest: 400 } as const;

/** Latency figures of one run, ms. */
export interface PoliteFigures {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Where the slowest call's time went (the timing its answer carries). */
  readonly slowest: string;
}

/** A service whose event loop is watched during an attack: its name and its /metrics URL. */
export interface WatchedLoop {
  readonly name: string;
  readonly metricsUrl: string;
}

/** Event-loop delay of one service during an attack, ms: the p99 of its delay histogram, and its longest stall. */
export interface LoopDelay {
  readonly name: string;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** prom-client's event-loop monitor period (createMetricsRegistry): its max is a period plus the delay. */
const PROM_CLIENT_PERIOD_S = 0.02;

/** Reads the delay each watched loop saw between `before` and now (a scrape; prom-client's max restarts at each). */
async function loopDelays(loops: readonly WatchedLoop[], before: readonly Map<number, number>[]): Promise<LoopDelay[]> {
  return Promise.all(
    loops.map(async (l, i) => {
      const now = await scrape(l.metricsUrl);
      const d = histogramDelta(before[i]!, histogramBuckets(now, "nodejs_eventloop_delay_seconds"), 0.99);
      const maxS = Math.max(0, total(now, "nodejs_eventloop_lag_max_seconds") - PROM_CLIENT_PERIOD_S);
      return { name: l.name, p99Ms: 1_000 * d.quantile, maxMs: 1_000 * maxS };
    }),
  );
}

/**
 * Where one call's time went, from the timing the gateway returns: outside the gateway's handler
 * (connection, body read and parse, the gateway's loop before and after), gateway to worker
 * (encode, produce, Kafka, the worker's fetch), on the worker before its batch (of which
 * tokenizing, queue wait included), the model run, and the reply back (worker to gateway).
 */
function timeline(ms: number, t: { totalMs: number; queueMs: number; heldMs: number; tokenizeMs: number; inferenceMs: number } | undefined): string {
  if (t === undefined) return `${ms.toFixed(0)} ms, no timing`;
  const f = (x: number): string => Math.max(0, x).toFixed(0);
  return (
    `${f(ms)} ms = outside the handler ${f(ms - t.totalMs)} + gateway→worker ${f(t.queueMs - t.heldMs)} + on the worker before its batch ${f(t.heldMs)}` +
    ` (tokenize ${f(t.tokenizeMs)}) + run ${f(t.inferenceMs)} + reply ${f(t.totalMs - t.queueMs - t.inferenceMs)}`
  );
}

/** Nearest-rank percentile of sorted values. */
export const percentile = (sorted: readonly number[], p: number): number => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;

export class PoliteCaller {
  /** The unloaded run (set by measureBaseline). */
  alone: PoliteFigures = { p50: 0, p99: 0, max: 0, slowest: "" };
  /** The last run under attack, and the event-loop delays during it. */
  last: PoliteFigures = { p50: 0, p99: 0, max: 0, slowest: "" };
  lastLoops: readonly LoopDelay[] = [];

  /** @param loops services whose event-loop delay is read around each attack */
  constructor(
    private readonly client: () => Client<typeof InferenceService>,
    private readonly model: () => string,
    private readonly services: () => readonly ServiceProcess[],
    private readonly loops: () => Promise<readonly WatchedLoop[]> = () => Promise.resolve([]),
  ) {}

  /** `calls` one-text Embeds, one every `everyMs`, each timed from its scheduled start; every one must succeed. */
  async run(calls = POLITE_CALLS, inference = this.client(), everyMs = POLITE_INTERVAL_MS): Promise<PoliteFigures> {
    const took: number[] = [];
    let slowest = "";
    let slowestMs = -1;
    const started = performance.now();
    const pending: Promise<void>[] = [];
    for (let i = 0; i < calls; i++) {
      const due = started + i * everyMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(
        inference.embed({ model: this.model(), inputs: [`polite call ${i}`] }, { timeoutMs: 30_000 }).then((r) => {
          const ms = performance.now() - due;
          assert.equal(r.embeddings.length, 1);
          took.push(ms);
          if (ms > slowestMs) {
            slowestMs = ms;
            slowest = `slowest at +${(due - started).toFixed(0)} ms: ${timeline(ms, r.timing)}`;
          }
        }),
      );
    }
    await Promise.all(pending);
    took.sort((a, b) => a - b);
    return { p50: percentile(took, 50), p99: percentile(took, 99), max: took[took.length - 1]!, slowest };
  }

  async measureBaseline(): Promise<void> {
    // The first call of a cold cluster (first in a CI run: JIT, a broker just started) can be slow
    // or fail while the worker joins: warm up until one answers.
    const answered = await eventually(async () => {
      await this.client().embed({ model: this.model(), inputs: ["warm-up"] }, { timeoutMs: 10_000 });
      return true;
    }, 30_000);
    assert.ok(answered, "a first call is answered within 30 s");
    await this.run(20); // warm
    this.alone = await this.run();
    console.error(`adversarial: unloaded: polite ${describe(this.alone)}`);
  }

  /**
   * Runs the attack and the polite caller together; asserts that the services are alive and,
   * unless `latencyBound` is false, the polite caller's p99 within 3× and its slowest call within
   * 5× of the unloaded p99 — with `goal`, exactly (#52); without, plus {@link ALLOWANCE_MS}.
   */
  async underAttack<T>(name: string, attack: () => Promise<T>, opts: { latencyBound?: boolean; goal?: boolean } = {}): Promise<T> {
    // The polite caller's connection is open before the attack starts, as a caller's would be
    // (its own TLS handshake racing 30 attacking ones measured the handshakes, not the attack).
    const inference = this.client();
    await inference.embed({ model: this.model(), inputs: ["polite warm-up"] });
    const loops = await this.loops();
    const before = await Promise.all(loops.map(async (l) => histogramBuckets(await scrape(l.metricsUrl), "nodejs_eventloop_delay_seconds")));
    const [result, figures] = await Promise.all([attack(), this.run(POLITE_CALLS, inference)]);
    this.last = figures;
    this.lastLoops = await loopDelays(loops, before);
    const p99Bound = P99_BOUND * this.alone.p99 + (opts.goal === true ? 0 : ALLOWANCE_MS.p99);
    const slowestBound = SLOWEST_BOUND * this.alone.p99 + (opts.goal === true ? 0 : ALLOWANCE_MS.slowest);
    const delays = this.lastLoops.map((l) => `${l.name} p99 ${l.p99Ms.toFixed(1)} ms, max ${l.maxMs.toFixed(0)} ms`).join("; ");
    console.error(
      `adversarial: ${name}: polite ${describe(figures)} (unloaded p50 / p99 / slowest ${this.alone.p50.toFixed(1)} / ${this.alone.p99.toFixed(1)} / ${this.alone.max.toFixed(1)} ms; bounds ${p99Bound.toFixed(0)} / ${slowestBound.toFixed(0)} ms); event-loop delay: ${delays || "not read"}`,
    );
    if (opts.latencyBound !== false) {
      assert.ok(figures.p99 <= p99Bound, `${name}: polite p99 ${figures.p99.toFixed(1)} ms over ${p99Bound.toFixed(0)} ms`);
      assert.ok(figures.max <= slowestBound, `${name}: slowest polite call ${figures.max.toFixed(1)} ms over ${slowestBound.toFixed(0)} ms`);
    }
    for (const p of this.services()) assert.ok(p.running, `${name}: ${p.name} still running`);
    return result;
  }
}

function describe(f: PoliteFigures): string {
  return `p50 / p99 / slowest ${f.p50.toFixed(1)} / ${f.p99.toFixed(1)} / ${f.max.toFixed(1)} ms; ${f.slowest}`;
}
