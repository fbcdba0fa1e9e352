/**
 * The printed summary of a chaos run: the invariants with their violation counts, then recovery per
 * fault kind, as fixed-width (Markdown-compatible) tables. Pure.
 */
import { type CheckResult, INVARIANTS } from "./checker.ts";
import type { Baseline, KindRecovery } from "./recovery.ts";

/** A Markdown-compatible fixed-width table. */
export function textTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string => `| ${head.map((_, i) => (cells[i] ?? "").padEnd(widths[i]!)).join(" | ")} |`;
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

const s = (ms: number | null): string => (ms === null ? "never" : (ms / 1000).toFixed(1));

const WHAT: Readonly<Record<(typeof INVARIANTS)[number], string>> = {
  silence: "every call ends (answer or error)",
  late: "ends by deadline + grace",
  "undocumented-error": "errors are Unavailable / DeadlineExceeded / ResourceExhausted",
  wrong: "answers equal the ones computed alone",
  "double-answer": "one answer per call",
  "unavailable-ran": "no job answered Unavailable ran unseen",
  unverifiable: "every answer had a reference (harness)",
};

/** The invariants table: one row per invariant with its violations, then the outcomes line. */
export function invariantsTable(r: CheckResult, graceMs: number): string {
  const rows = INVARIANTS.map((inv) => [inv, inv === "late" ? `${WHAT[inv]} (${graceMs / 1000} s)` : WHAT[inv], String(r.counts[inv])]);
  const outcomes = Object.entries(r.outcomes)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  return `${textTable(["invariant", "what", "violations"], rows)}\ncalls ${r.calls}: ${outcomes}`;
}

/** The recovery table: one row per fault kind. */
export function recoveryTable(rows: readonly KindRecovery[], base: Baseline): string {
  const body = rows.map((k) => [
    k.kind,
    String(k.faults),
    s(k.medianRecoveredMs),
    s(k.worstRecoveredMs),
    s(k.longestGapMs),
    s(k.worstMs),
    `${k.failed}/${k.sent}`,
  ]);
  return `${textTable(["fault kind", "n", "recovered s (median)", "recovered s (worst)", "longest gap s", "worst call s", "failed/sent during"], body)}\nbaseline before the first fault: ${base.rps.toFixed(1)} answers/s, p99 ${(base.p99Ms / 1000).toFixed(2)} s over ${base.calls} calls; recovered = from the heal to the first 5 s of calls at >= 80% of that rate with p99 <= max(2x, +0.25 s)`;
}
