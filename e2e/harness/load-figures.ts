/**
 * Figures of an open-loop load around events (a partition, a scale-up...): throughput before,
 * during and after, the longest gap between answers, the worst latency, losses and wrong answers.
 * Times are `performance.now()` milliseconds.
 */

/** One request of the load. */
export interface Outcome {
  readonly index: number;
  readonly sentAt: number;
  doneAt: number;
  /** Answers the caller got (a promise settles once: 0 or 1, anything else is a harness bug). */
  answers: number;
  ok: boolean;
  error?: string;
  vector?: Float32Array;
  /** Set by the final check: the answer is not its own text's vector. */
  wrong?: boolean;
}

/** An event of the run: `start`..`end` is the disturbance, `end`..`settled` the recovery window. */
export interface LoadEvent {
  readonly name: string;
  readonly start: number;
  readonly end: number;
  readonly settled: number;
  readonly note: string;
}

export interface EventFigures {
  readonly name: string;
  readonly durationS: number;
  readonly beforeRps: number;
  readonly duringRps: number;
  readonly afterRps: number;
  /** Longest time without any answer from `start` to `settled` (the stall), ms. */
  readonly longestGapMs: number;
  /** Worst latency of a request sent from `start` to `settled`, ms. */
  readonly worstLatencyMs: number;
  /** Requests sent from `start` to `settled` that took over 1 s. */
  readonly slow: number;
  readonly sent: number;
  readonly lost: number;
  readonly wrong: number;
  readonly retries: number;
}

/** Answers per second completed in [from, to). */
function rate(done: readonly number[], from: number, to: number): number {
  if (to <= from) return 0;
  return done.filter((t) => t >= from && t < to).length / ((to - from) / 1000);
}

/** Figures of `event`; the "before" window is the `baselineMs` before its start. */
export function figuresOf(event: LoadEvent, outcomes: readonly Outcome[], retryTimes: readonly number[], baselineMs = 8_000): EventFigures {
  const done = outcomes
    .filter((o) => o.ok)
    .map((o) => o.doneAt)
    .sort((a, b) => a - b);
  const inWindow = done.filter((t) => t >= event.start && t < event.settled);
  let longestGapMs = (inWindow[0] ?? event.settled) - event.start;
  for (let k = 1; k < inWindow.length; k++) longestGapMs = Math.max(longestGapMs, inWindow[k]! - inWindow[k - 1]!);
  const sentIn = outcomes.filter((o) => o.sentAt >= event.start && o.sentAt < event.settled);
  const latencies = sentIn.map((o) => (o.ok ? o.doneAt - o.sentAt : Number.POSITIVE_INFINITY));
  return {
    name: event.name,
    durationS: (event.end - event.start) / 1000,
    beforeRps: rate(done, event.start - baselineMs, event.start),
    duringRps: rate(done, event.start, Math.max(event.end, event.start + 1_000)),
    afterRps: rate(done, event.end, event.settled),
    longestGapMs,
    worstLatencyMs: Math.max(0, ...latencies),
    slow: latencies.filter((l) => l > 1_000).length,
    sent: sentIn.length,
    lost: sentIn.filter((o) => !o.ok).length,
    wrong: sentIn.filter((o) => o.wrong === true || o.answers > 1).length,
    retries: retryTimes.filter((t) => t >= event.start && t < event.settled).length,
  };
}

/** A fixed-width text table of the figures. */
export function figuresTable(rows: readonly EventFigures[]): string {
  const head = ["event", "disturbed s", "rps before", "rps during", "rps after", "stall s", "worst lat s", ">1s", "sent", "lost", "dup/wrong", "retries"];
  const body = rows.map((r) => [
    r.name,
    r.durationS.toFixed(1),
    r.beforeRps.toFixed(1),
    r.duringRps.toFixed(1),
    r.afterRps.toFixed(1),
    (r.longestGapMs / 1000).toFixed(2),
    Number.isFinite(r.worstLatencyMs) ? (r.worstLatencyMs / 1000).toFixed(2) : "never",
    String(r.slow),
    String(r.sent),
    String(r.lost),
    String(r.wrong),
    String(r.retries),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map(line)].join("\n");
}
