/**
 * The history checker of the chaos campaign (issue #49). Pure: it reads a history (history.ts) and
 * says, per invariant, which calls broke it:
 *
 * - **silence**: every call ends (the caller got an answer or an error);
 * - **late**: it ends before its deadline plus a stated grace;
 * - **undocumented error**: an error is one of the documented codes (Unavailable,
 *   DeadlineExceeded, ResourceExhausted), never Internal, Unknown, ...;
 * - **wrong**: an answer equals, within a tolerance, the answers computed once, alone, for the
 *   same texts before any fault — so never another call's result;
 * - **double answer**: a call is recorded as ended once, never with two different answers;
 * - **unavailable ran**: a job whose call a gateway answered Unavailable (its record's fate
 *   unknown) was not run to completion unseen: the gateway logs each result that comes for one;
 * - **unverifiable**: an answer with no reference to compare to (a harness bug, counted apart).
 */
import { RESULT_AFTER_UNAVAILABLE } from "../../services/gateway/src/pending-jobs.ts";
import { type CallRecord, type FaultRecord, type HistoryRecord, type LogRecord, referenceKeys, referenceKind } from "./history.ts";

/** The error codes a call may end with under faults (the API's documented retriable/budget ones). */
export const DOCUMENTED_ERRORS: ReadonlySet<string> = new Set(["Unavailable", "DeadlineExceeded", "ResourceExhausted"]);

/** The invariants, in the order the summary prints them. */
export const INVARIANTS = ["silence", "late", "undocumented-error", "wrong", "double-answer", "unavailable-ran", "unverifiable"] as const;

/** One invariant's name. */
export type Invariant = (typeof INVARIANTS)[number];

/** A call that broke an invariant, with the faults active around it. */
export interface Violation {
  readonly invariant: Invariant;
  /** The call; -1 for a job seen only in a gateway's log (unavailable-ran). */
  readonly callId: number;
  readonly detail: string;
  /** Ids of faults active from the call's send to its end (or deadline). */
  readonly faults: readonly number[];
}

/** What the checker found. */
export interface CheckResult {
  readonly calls: number;
  readonly ok: number;
  /** Calls by outcome (`OK`, `Unavailable`, ...). */
  readonly outcomes: Readonly<Record<string, number>>;
  readonly violations: readonly Violation[];
  /** Violations per invariant (every invariant present, 0 when none). */
  readonly counts: Readonly<Record<Invariant, number>>;
}

/** Checker settings. */
export interface CheckOptions {
  /** Slack after a call's deadline before it counts as late, ms (client timers on a busy machine). */
  readonly graceMs: number;
  /** Largest absolute difference between an answer and its reference that still counts as equal. */
  readonly tolerance: number;
}

/** The settings the runner uses (docs/chaos.md states them). */
export const DEFAULT_CHECK_OPTIONS: CheckOptions = { graceMs: 2_000, tolerance: 1e-3 };

/** Largest absolute element-wise difference (Infinity when the lengths differ). */
export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) return Number.POSITIVE_INFINITY;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Faults active at any time in [from, to]. */
export function faultsDuring(faults: readonly FaultRecord[], from: number, to: number): number[] {
  return faults.filter((f) => f.startMs <= to && f.endMs >= from).map((f) => f.id);
}

/**
 * Whose answer a wrong result is: the reference keys of the same kind whose answer equals the
 * result's first unit (an answer meant for another call), or undefined.
 */
function whoseAnswer(first: readonly number[], refs: ReadonlyMap<string, readonly number[]>, kind: string, tol: number): string | undefined {
  const hits: string[] = [];
  for (const [k, v] of refs) if (k.startsWith(`${kind}/`) && maxAbsDiff(first, v) <= tol) hits.push(k.slice(kind.length + 1));
  return hits.length > 0 ? hits.slice(0, 3).join(", ") : undefined;
}

/** Checks every call of `history` against the invariants above. */
export function checkHistory(history: readonly HistoryRecord[], options: CheckOptions = DEFAULT_CHECK_OPTIONS): CheckResult {
  const refs = new Map<string, readonly number[]>();
  const faults: FaultRecord[] = [];
  const byId = new Map<number, CallRecord[]>();
  const ranUnseen: LogRecord[] = [];
  for (const r of history) {
    if (r.type === "reference") refs.set(`${r.kind}/${r.key}`, r.result);
    else if (r.type === "fault") faults.push(r);
    else if (r.type === "call") byId.set(r.id, [...(byId.get(r.id) ?? []), r]);
    else if (r.msg === RESULT_AFTER_UNAVAILABLE) ranUnseen.push(r);
  }
  const violations: Violation[] = ranUnseen.map((r) => ({
    invariant: "unavailable-ran",
    callId: -1,
    detail: `job ${r.jobId ?? "?"}: ${r.process} answered it Unavailable, then its result came`,
    faults: faultsDuring(faults, r.timeMs - 10_000, r.timeMs),
  }));
  const outcomes: Record<string, number> = {};
  let ok = 0;
  for (const [id, records] of byId) {
    const c = records[0]!;
    const around = faultsDuring(faults, c.sentMs, c.endMs ?? c.sentMs + c.deadlineMs);
    const flag = (invariant: Invariant, detail: string): void => {
      violations.push({ invariant, callId: id, detail, faults: around });
    };
    if (records.length > 1) {
      const answers = new Set(records.map((r) => `${r.outcome}/${r.digest ?? ""}`));
      flag(
        "double-answer",
        answers.size > 1 ? `${records.length} ends with different answers: ${[...answers].join(" | ")}` : `${records.length} ends, same answer`,
      );
    }
    outcomes[c.outcome] = (outcomes[c.outcome] ?? 0) + 1;
    if (c.endMs === null) {
      flag("silence", `${c.kind} via ${c.gateway}: no answer and no error (deadline ${c.deadlineMs} ms)`);
      continue;
    }
    const tookMs = c.endMs - c.sentMs;
    if (tookMs > c.deadlineMs + options.graceMs) {
      flag("late", `${c.kind} via ${c.gateway}: ended ${tookMs} ms after sending (${c.outcome}), deadline ${c.deadlineMs} + grace ${options.graceMs} ms`);
    }
    if (c.outcome !== "OK") {
      if (!DOCUMENTED_ERRORS.has(c.outcome)) flag("undocumented-error", `${c.kind} via ${c.gateway}: ${c.outcome}: ${c.message ?? ""}`);
      continue;
    }
    ok++;
    const rk = referenceKind(c.kind);
    const parts = referenceKeys(c.kind, c.textIds).map((k) => refs.get(`${rk}/${k}`));
    if (parts.some((p) => p === undefined) || c.result === undefined) {
      flag("unverifiable", `${c.kind} texts ${c.textIds.join(",")}: ${c.result === undefined ? "no result recorded" : "no reference for a unit"}`);
      continue;
    }
    const expected = parts.flatMap((p) => [...p!]);
    const diff = maxAbsDiff(c.result, expected);
    if (diff > options.tolerance) {
      const unit = parts[0]!.length;
      const owner = c.result.length >= unit ? whoseAnswer(c.result.slice(0, unit), refs, rk, options.tolerance) : undefined;
      flag(
        "wrong",
        `${c.kind} texts ${c.textIds.join(",")} via ${c.gateway}: ${c.result.length === expected.length ? `max diff ${diff.toExponential(2)}` : `${c.result.length} values, expected ${expected.length}`}${owner === undefined ? "" : `; its first part is the answer for ${owner}`}`,
      );
    }
  }
  const counts = Object.fromEntries(INVARIANTS.map((i) => [i, violations.filter((v) => v.invariant === i).length])) as Record<Invariant, number>;
  return { calls: byId.size, ok, outcomes, violations, counts };
}

/** Whether the run passed: no violation of any invariant. */
export function passed(result: CheckResult): boolean {
  return result.violations.length === 0;
}
