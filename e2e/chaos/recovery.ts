/**
 * Recovery per fault (issue #49): how long after a fault is healed throughput and p99 are back to
 * where they were before any fault, and what the fault cost callers meanwhile. Pure, over a
 * history's calls and faults.
 *
 * Baseline: the calls sent before the first fault (the schedule's quiet start). Healthy window:
 * `windowMs` of calls sent from t on, whose answers per second reach `rateShare` of the
 * baseline's and whose p99 (a failed call counts as endless) is at most
 * max(`p99Factor` x baseline p99, baseline p99 + `p99SlackMs`). Recovered: the first healthy
 * window starting at or after the heal, searched in `stepMs` steps.
 */
import type { CallRecord, FaultRecord } from "./history.ts";

/** Settings of the recovery measure. */
export interface RecoveryOptions {
  readonly windowMs: number;
  readonly stepMs: number;
  readonly rateShare: number;
  readonly p99Factor: number;
  readonly p99SlackMs: number;
}

/** The settings the runner uses. */
export const DEFAULT_RECOVERY: RecoveryOptions = { windowMs: 5_000, stepMs: 500, rateShare: 0.8, p99Factor: 2, p99SlackMs: 250 };

/** The baseline: answers per second and p99 latency before the first fault. */
export interface Baseline {
  readonly rps: number;
  readonly p99Ms: number;
  readonly calls: number;
}

/** One fault's figures. */
export interface FaultRecovery {
  readonly fault: FaultRecord;
  /** Ms from the heal to the first healthy window; null when none came before the run ended. */
  readonly recoveredMs: number | null;
  /** Longest time without any OK answer from the fault's start to its recovery (or the run's end), ms. */
  readonly longestGapMs: number;
  /** Worst latency of a call sent while the fault was on (an error or silence counts as its full deadline). */
  readonly worstMs: number;
  /** Calls sent while the fault was on that did not end OK. */
  readonly failed: number;
  readonly sent: number;
}

/** p99 of `xs` (nearest rank); 0 for none. */
export function p99(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(0.99 * s.length) - 1)]!;
}

const latency = (c: CallRecord): number => (c.outcome === "OK" && c.endMs !== null ? c.endMs - c.sentMs : Number.POSITIVE_INFINITY);

/** The baseline from the calls sent in [from, to). */
export function baselineOf(calls: readonly CallRecord[], from: number, to: number): Baseline {
  const sent = calls.filter((c) => c.sentMs >= from && c.sentMs < to);
  const okCount = sent.filter((c) => c.outcome === "OK").length;
  const fin = sent.map(latency).filter(Number.isFinite);
  return { rps: to > from ? okCount / ((to - from) / 1000) : 0, p99Ms: p99(fin), calls: sent.length };
}

/** Whether the calls sent in [t, t + windowMs) look like the baseline. */
function healthy(calls: readonly CallRecord[], t: number, base: Baseline, o: RecoveryOptions): boolean {
  const sent = calls.filter((c) => c.sentMs >= t && c.sentMs < t + o.windowMs);
  if (sent.length === 0) return false;
  const okRate = sent.filter((c) => c.outcome === "OK").length / (o.windowMs / 1000);
  const bound = Math.max(base.p99Ms * o.p99Factor, base.p99Ms + o.p99SlackMs);
  return okRate >= base.rps * o.rateShare && p99(sent.map(latency)) <= bound;
}

/** Figures of each fault, in the order given. */
export function recoveries(
  calls: readonly CallRecord[],
  faults: readonly FaultRecord[],
  base: Baseline,
  o: RecoveryOptions = DEFAULT_RECOVERY,
): FaultRecovery[] {
  const lastSent = Math.max(0, ...calls.map((c) => c.sentMs));
  const okEnds = calls
    .filter((c) => c.outcome === "OK" && c.endMs !== null)
    .map((c) => c.endMs!)
    .sort((a, b) => a - b);
  return faults.map((f) => {
    let recoveredAt: number | null = null;
    for (let t = f.endMs; t + o.windowMs <= lastSent + 1; t += o.stepMs) {
      if (healthy(calls, t, base, o)) {
        recoveredAt = t;
        break;
      }
    }
    const until = recoveredAt ?? lastSent;
    const inside = okEnds.filter((e) => e >= f.startMs && e <= until);
    let gap = (inside[0] ?? until) - f.startMs;
    for (let k = 1; k < inside.length; k++) gap = Math.max(gap, inside[k]! - inside[k - 1]!);
    const during = calls.filter((c) => c.sentMs >= f.startMs && c.sentMs < f.endMs);
    const worst = Math.max(0, ...during.map((c) => (c.outcome === "OK" && c.endMs !== null ? c.endMs - c.sentMs : c.deadlineMs)));
    return {
      fault: f,
      recoveredMs: recoveredAt === null ? null : recoveredAt - f.endMs,
      longestGapMs: Math.max(0, gap),
      worstMs: worst,
      failed: during.filter((c) => c.outcome !== "OK").length,
      sent: during.length,
    };
  });
}

/** Per fault kind: count, median and worst recovery, longest gap, worst latency, failed calls. */
export interface KindRecovery {
  readonly kind: string;
  readonly faults: number;
  readonly medianRecoveredMs: number | null;
  /** null when some fault of the kind never recovered within the run. */
  readonly worstRecoveredMs: number | null;
  readonly longestGapMs: number;
  readonly worstMs: number;
  readonly failed: number;
  readonly sent: number;
}

/** Groups fault figures by kind (kinds in first-seen order). */
export function byKind(rows: readonly FaultRecovery[]): KindRecovery[] {
  const kinds = [...new Set(rows.map((r) => r.fault.kind))];
  return kinds.map((kind) => {
    const mine = rows.filter((r) => r.fault.kind === kind);
    const rec = mine.map((r) => r.recoveredMs);
    const done = rec.filter((r): r is number => r !== null).sort((a, b) => a - b);
    return {
      kind,
      faults: mine.length,
      medianRecoveredMs: done.length === 0 ? null : done[Math.floor((done.length - 1) / 2)]!,
      worstRecoveredMs: rec.includes(null) ? null : (done.at(-1) ?? null),
      longestGapMs: Math.max(...mine.map((r) => r.longestGapMs)),
      worstMs: Math.max(...mine.map((r) => r.worstMs)),
      failed: mine.reduce((n, r) => n + r.failed, 0),
      sent: mine.reduce((n, r) => n + r.sent, 0),
    };
  });
}
