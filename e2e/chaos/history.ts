/**
 * The history of a chaos run (issue #49), one JSON object a line: what every client saw (calls),
 * the answers computed once, alone, before the faults (references), what was injected (faults)
 * and what the processes logged at warn and above (logs). Times are wall-clock ms (Date.now()),
 * so they line up with the services' own log lines.
 */
import { createHash } from "node:crypto";

/** The API a call went through. */
export type CallKind = "embed" | "rerank" | "classify" | "openai";

/** One client call, as its caller saw it. */
export interface CallRecord {
  readonly type: "call";
  readonly id: number;
  readonly kind: CallKind;
  /** The texts' ids: for rerank the query's first, then the documents'. */
  readonly textIds: readonly number[];
  /** The gateway host it was sent to. */
  readonly gateway: string;
  readonly sentMs: number;
  /** The call's budget, ms after `sentMs`. */
  readonly deadlineMs: number;
  /** When the caller got its answer or error; null when it never did (silence). */
  readonly endMs: number | null;
  /** `OK` or the Connect code's name (`Unavailable`, `DeadlineExceeded`, ...). */
  readonly outcome: string;
  /** The answer's numbers (see `resultValues`), for an OK call. */
  readonly result?: readonly number[];
  /** A short hash of the answer, rounded (for the eye; the checker compares `result`). */
  readonly digest?: string;
  readonly message?: string;
}

/** The answer for one unit (a text, or a query-document pair), computed alone before the faults. */
export interface ReferenceRecord {
  readonly type: "reference";
  readonly kind: "embed" | "rerank" | "classify";
  /** The text's id; for rerank `query:document`. */
  readonly key: string;
  readonly result: readonly number[];
}

/** A fault as injected. */
export interface FaultRecord {
  readonly type: "fault";
  readonly id: number;
  readonly kind: string;
  /** The host it hit (the controller resolved to its host). */
  readonly target: string;
  readonly startMs: number;
  /** When it was healed (the process restarted or resumed, the rules or qdisc removed). */
  readonly endMs: number;
  readonly note?: string;
}

/** A warn/error line a process logged. */
export interface LogRecord {
  readonly type: "log";
  readonly process: string;
  readonly timeMs: number;
  readonly level: string;
  readonly msg: string;
  readonly jobId?: string;
}

/** Any line of a history. */
export type HistoryRecord = CallRecord | ReferenceRecord | FaultRecord | LogRecord;

/** The history as JSONL text. */
export function historyToJsonl(records: readonly HistoryRecord[]): string {
  return records.map((r) => JSON.stringify(r)).join("\n") + (records.length > 0 ? "\n" : "");
}

/**
 * Parses JSONL back into records.
 * @throws Error naming the first line that is not a record
 */
export function parseHistory(text: string): HistoryRecord[] {
  const out: HistoryRecord[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    if (line.trim() === "") continue;
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch (err) {
      throw new Error(`history line ${i + 1}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    const type = (rec as { type?: unknown }).type;
    if (!["call", "reference", "fault", "log"].includes(String(type))) throw new Error(`history line ${i + 1}: unknown record type ${JSON.stringify(type)}`);
    out.push(rec as HistoryRecord);
  }
  return out;
}

/** Values rounded to 6 decimals: what a history keeps of an answer (float32 has ~7 digits). */
export function rounded(values: Iterable<number>): number[] {
  return Array.from(values, (v) => Math.round(v * 1e6) / 1e6);
}

/** A short hash of values rounded to 3 decimals: equal for answers the checker calls equal, nearly always. */
export function digestOf(values: readonly number[]): string {
  return createHash("sha256")
    .update(values.map((v) => v.toFixed(3)).join(","))
    .digest("hex")
    .slice(0, 12);
}

/** The reference key(s) a call's answer is made of, in the order of its `result`. */
export function referenceKeys(kind: CallKind, textIds: readonly number[]): string[] {
  if (kind === "rerank") {
    const [q, ...docs] = textIds;
    return docs.map((d) => `${q}:${d}`);
  }
  return textIds.map(String);
}

/** The reference kind a call is checked against (the OpenAI route embeds). */
export function referenceKind(kind: CallKind): ReferenceRecord["kind"] {
  return kind === "openai" ? "embed" : kind;
}
