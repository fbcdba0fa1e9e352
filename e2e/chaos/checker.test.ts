import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { RESULT_AFTER_UNAVAILABLE } from "../../services/gateway/src/pending-jobs.ts";
import { checkHistory, DEFAULT_CHECK_OPTIONS, passed } from "./checker.ts";
import { type CallRecord, type FaultRecord, type HistoryRecord, historyToJsonl, parseHistory } from "./history.ts";
import { baselineOf, byKind, recoveries } from "./recovery.ts";
import { invariantsTable, recoveryTable } from "./report.ts";

const REFS: HistoryRecord[] = [
  { type: "reference", kind: "embed", key: "1", result: [0.1, 0.2] },
  { type: "reference", kind: "embed", key: "2", result: [0.3, 0.4] },
  { type: "reference", kind: "classify", key: "1", result: [0.7, 0.2, 0.1] },
  { type: "reference", kind: "rerank", key: "9:1", result: [0.5] },
  { type: "reference", kind: "rerank", key: "9:2", result: [0.25] },
];
const FAULT: FaultRecord = { type: "fault", id: 1, kind: "kill-worker", target: "w2", startMs: 1_000, endMs: 5_000 };

/** A call that went well: embed of texts 1 and 2, 100 ms, deadline 10 s. */
function call(over: Partial<CallRecord> = {}): CallRecord {
  return {
    type: "call",
    id: 1,
    kind: "embed",
    textIds: [1, 2],
    gateway: "gw1",
    sentMs: 0,
    deadlineMs: 10_000,
    endMs: 100,
    outcome: "OK",
    result: [0.1, 0.2, 0.3, 0.4],
    ...over,
  };
}

describe("history checker", () => {
  test("a clean history passes: embed, the OpenAI route, rerank, classify, documented errors", () => {
    const r = checkHistory([
      ...REFS,
      FAULT,
      call(),
      call({ id: 2, kind: "openai", result: [0.1, 0.2, 0.3, 0.4000004] }),
      call({ id: 3, kind: "rerank", textIds: [9, 2, 1], result: [0.25, 0.5] }),
      call({ id: 4, kind: "classify", textIds: [1], result: [0.7, 0.2, 0.1] }),
      call({ id: 5, outcome: "Unavailable", result: undefined, endMs: 3_000 }),
      call({ id: 6, outcome: "DeadlineExceeded", result: undefined, endMs: 10_400 }),
      call({ id: 7, outcome: "ResourceExhausted", result: undefined }),
    ]);
    assert.equal(r.calls, 7);
    assert.equal(r.ok, 4);
    assert.deepEqual(r.violations, []);
    assert.ok(passed(r));
    assert.deepEqual(r.outcomes, { OK: 4, Unavailable: 1, DeadlineExceeded: 1, ResourceExhausted: 1 });
  });

  test("silence: a call that never ended, with the fault around it", () => {
    const r = checkHistory([...REFS, FAULT, call({ id: 5, sentMs: 2_000, endMs: null, outcome: "none", result: undefined })]);
    assert.equal(r.counts.silence, 1);
    assert.deepEqual(r.violations[0]?.faults, [1]);
    assert.ok(!passed(r));
  });

  test("late: past its deadline plus the grace, even with the right answer", () => {
    const r = checkHistory([
      ...REFS,
      call({ endMs: 10_000 + DEFAULT_CHECK_OPTIONS.graceMs + 1 }),
      call({ id: 2, endMs: 10_000 + DEFAULT_CHECK_OPTIONS.graceMs }),
    ]);
    assert.equal(r.counts.late, 1);
    assert.equal(r.violations[0]?.callId, 1);
  });

  test("undocumented error: Internal and Unknown are violations", () => {
    const r = checkHistory([...REFS, call({ outcome: "Internal", result: undefined }), call({ id: 2, outcome: "Unknown", result: undefined })]);
    assert.equal(r.counts["undocumented-error"], 2);
  });

  test("wrong: another call's answer is caught and named; a reordered rerank too", () => {
    const r = checkHistory([
      ...REFS,
      call({ textIds: [1], result: [0.3, 0.4] }),
      call({ id: 2, kind: "rerank", textIds: [9, 1, 2], result: [0.25, 0.5] }),
      call({ id: 3, textIds: [1, 2], result: [0.1, 0.2] }),
    ]);
    assert.equal(r.counts.wrong, 3);
    assert.match(r.violations[0]!.detail, /first part is the answer for 2/);
    assert.match(r.violations[2]!.detail, /2 values, expected 4/);
  });

  test("double answer: one call ended twice with different answers, or twice alike", () => {
    const r = checkHistory([...REFS, call(), call({ result: [0.3, 0.4, 0.1, 0.2], digest: "other" }), call({ id: 2 }), call({ id: 2 })]);
    assert.equal(r.counts["double-answer"], 2);
    assert.match(r.violations.find((v) => v.callId === 1)!.detail, /different answers/);
    assert.match(r.violations.find((v) => v.callId === 2)!.detail, /same answer/);
  });

  test("unavailable ran: a result that came for a job a gateway answered Unavailable; other warnings are not", () => {
    const warn = (msg: string, jobId: string): HistoryRecord => ({ type: "log", process: "gw1", timeMs: 3_000, level: "warn", msg, jobId });
    const r = checkHistory([
      ...REFS,
      FAULT,
      call({ outcome: "Unavailable", result: undefined }),
      warn(RESULT_AFTER_UNAVAILABLE, "job-7"),
      warn("a produce request is stuck (partition leader silent?); starting a new producer", "job-8"),
    ]);
    assert.equal(r.counts["unavailable-ran"], 1);
    assert.equal(passed(r), false);
    const v = r.violations[0]!;
    assert.equal(v.callId, -1);
    assert.match(v.detail, /job job-7: gw1 answered it Unavailable/);
    assert.deepEqual(v.faults, [1]);
  });

  test("unverifiable: an answer with no reference is counted apart", () => {
    const r = checkHistory([...REFS, call({ textIds: [1, 77] })]);
    assert.equal(r.counts.unverifiable, 1);
    assert.equal(r.counts.wrong, 0);
  });

  test("the history round-trips through JSONL; a bad line is named", () => {
    const h = [...REFS, FAULT, call()];
    assert.deepEqual(parseHistory(historyToJsonl(h)), h);
    assert.throws(() => parseHistory('{"type":"call"}\n{oops'), /history line 2: not JSON/);
    assert.throws(() => parseHistory('{"type":"vote"}'), /line 1: unknown record type "vote"/);
  });
});

describe("recovery per fault kind", () => {
  /** 10 calls/s of 50 ms; calls sent in [from, to) fail (Unavailable at their deadline) or are slow. */
  function load(untilMs: number, bad: { from: number; to: number; slowMs?: number }): CallRecord[] {
    const out: CallRecord[] = [];
    for (let t = 0, id = 0; t < untilMs; t += 100, id++) {
      const inBad = t >= bad.from && t < bad.to;
      const ms = inBad && bad.slowMs !== undefined ? bad.slowMs : 50;
      out.push(
        call({
          id,
          sentMs: t,
          endMs: inBad && bad.slowMs === undefined ? t + 10_000 : t + ms,
          outcome: inBad && bad.slowMs === undefined ? "Unavailable" : "OK",
        }),
      );
    }
    return out;
  }

  test("recovered when throughput and p99 are back; the gap and the failures during the fault", () => {
    const calls = load(60_000, { from: 20_000, to: 27_000 });
    const base = baselineOf(calls, 0, 20_000);
    assert.equal(base.rps, 10);
    assert.equal(base.p99Ms, 50);
    const fault: FaultRecord = { ...FAULT, startMs: 20_000, endMs: 25_000 };
    const [row] = recoveries(calls, [fault], base);
    // Windows starting at 25 s hold calls sent until 27 s that failed; the first clean one starts at 27 s.
    assert.equal(row!.recoveredMs, 2_000);
    assert.equal(row!.failed, 50);
    assert.equal(row!.worstMs, 10_000);
    assert.ok(row!.longestGapMs >= 7_000 && row!.longestGapMs < 7_200, `gap ${row!.longestGapMs}`);
  });

  test("slow answers count against p99; a fault never recovered from says so", () => {
    const calls = load(40_000, { from: 20_000, to: 40_000, slowMs: 900 });
    const base = baselineOf(calls, 0, 20_000);
    const rows = recoveries(calls, [{ ...FAULT, startMs: 20_000, endMs: 22_000 }], base);
    assert.equal(rows[0]!.recoveredMs, null);
    const kinds = byKind([...rows, ...recoveries(load(60_000, { from: 20_000, to: 21_000 }), [{ ...FAULT, id: 2, startMs: 20_000, endMs: 21_000 }], base)]);
    assert.equal(kinds.length, 1);
    assert.equal(kinds[0]!.faults, 2);
    assert.equal(kinds[0]!.worstRecoveredMs, null, "worst is 'never' when one never recovered");
    assert.equal(kinds[0]!.medianRecoveredMs, 0);
    assert.match(recoveryTable(kinds, base), /\| kill-worker \| 2 +\| 0\.0 +\| never/);
  });

  test("the invariants table lists every invariant with its count", () => {
    const r = checkHistory([...REFS, call({ outcome: "Internal", result: undefined })]);
    const t = invariantsTable(r, 2_000);
    assert.match(t, /\| undocumented-error \| .* \| 1 +\|/);
    assert.match(t, /\| silence +\| .* \| 0 +\|/);
    assert.match(t, /calls 1: Internal 1/);
  });
});
