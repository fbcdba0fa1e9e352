import { isJsonObject } from "@shoal/common";
import type { LineError } from "./batch-records.ts";

/** Batch endpoints Shoal runs (`url` of a line, `endpoint` of a batch). */
export const BATCH_ENDPOINTS: readonly string[] = ["/v1/embeddings"];

/** One request of an input file. */
export interface BatchLine {
  /** 0-based physical line of the file (blank lines are skipped but counted). */
  readonly index: number;
  readonly customId: string;
  readonly body: Record<string, unknown>;
}

/** One physical line of a file: its 0-based index and text (no line break). */
export interface RawLine {
  readonly index: number;
  readonly text: string;
}

/**
 * Cuts a byte stream that arrives in chunks of any size into lines (`\n`, `\r\n`). A line may span
 * chunks; text is decoded once the whole line is there, so a multi-byte character cut by a chunk
 * boundary is never split.
 */
export class LineSplitter {
  private carry: Buffer[] = [];
  private next = 0;

  /** The lines `chunk` completes. */
  push(chunk: Buffer): RawLine[] {
    const out: RawLine[] = [];
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      const tail = chunk.subarray(from, nl);
      const bytes = this.carry.length === 0 ? tail : Buffer.concat([...this.carry, tail]);
      this.carry = [];
      out.push(this.line(bytes));
      from = nl + 1;
    }
    if (from < chunk.length) this.carry.push(chunk.subarray(from));
    return out;
  }

  /** The last line, if the stream did not end with a line break. */
  end(): RawLine[] {
    if (this.carry.length === 0) return [];
    const bytes = Buffer.concat(this.carry);
    this.carry = [];
    return [this.line(bytes)];
  }

  private line(bytes: Buffer): RawLine {
    const end = bytes.length > 0 && bytes[bytes.length - 1] === 13 ? bytes.length - 1 : bytes.length;
    return { index: this.next++, text: bytes.toString("utf8", 0, end) };
  }
}

/** The lines of a file read as a series of chunks. */
export async function* linesOf(chunks: AsyncIterable<Buffer>): AsyncGenerator<RawLine> {
  const splitter = new LineSplitter();
  for await (const chunk of chunks) yield* splitter.push(chunk);
  yield* splitter.end();
}

function lineError(index: number, code: string, message: string, param: string | null = null): LineError {
  return { code, message, line: index + 1, param };
}

/**
 * Parses one line against the batch's endpoint: a JSON object with a string `custom_id`, `method`
 * POST, `url` equal to the batch's endpoint and an object `body`. What the body says is checked when
 * the line runs (a bad body is that line's 400 in the error file, as OpenAI answers it).
 */
export function parseLine(raw: RawLine, endpoint: string): BatchLine | LineError {
  let value: unknown;
  try {
    value = JSON.parse(raw.text);
  } catch {
    return lineError(raw.index, "invalid_json_line", "This line is not parseable as valid JSON.");
  }
  if (!isJsonObject(value)) return lineError(raw.index, "invalid_json_line", "This line is not a JSON object.");
  const customId = value["custom_id"];
  if (typeof customId !== "string" || customId === "" || customId.length > 512) {
    return lineError(raw.index, "missing_required_parameter", "custom_id: a non-empty string of at most 512 characters is required.", "custom_id");
  }
  if (value["method"] !== "POST") return lineError(raw.index, "invalid_method", "method: only POST is supported.", "method");
  const url = value["url"];
  if (typeof url !== "string" || !BATCH_ENDPOINTS.includes(url)) {
    return lineError(raw.index, "invalid_url", `url: expected one of ${BATCH_ENDPOINTS.join(", ")}.`, "url");
  }
  if (url !== endpoint) return lineError(raw.index, "mismatched_url", `url: this batch's endpoint is ${endpoint}; every line must call it.`, "url");
  const body = value["body"];
  if (!isJsonObject(body)) return lineError(raw.index, "invalid_value", "body: a JSON object is required.", "body");
  return { index: raw.index, customId, body };
}

export interface ValidationLimits {
  /** Most requests in one file (OpenAI: 50,000). */
  readonly maxLines: number;
  /** Most errors reported (the rest are counted, not listed). */
  readonly maxErrors: number;
}

export interface ValidationResult {
  /** Requests in the file (non-blank lines). */
  readonly total: number;
  /** Empty: the file is valid. */
  readonly errors: LineError[];
}

/**
 * Checks a whole input file as OpenAI does before a batch starts: every line parses
 * ({@link parseLine}), custom_ids are unique, the file holds at least one and at most `maxLines`
 * requests.
 */
export async function validateLines(lines: AsyncIterable<RawLine>, endpoint: string, limits: ValidationLimits): Promise<ValidationResult> {
  const seen = new Set<string>();
  const errors: LineError[] = [];
  let total = 0;
  let failed = 0;
  const report = (e: LineError): void => {
    failed++;
    if (errors.length < limits.maxErrors) errors.push(e);
  };
  for await (const raw of lines) {
    if (raw.text.trim() === "") continue;
    total++;
    if (total > limits.maxLines) continue;
    const line = parseLine(raw, endpoint);
    if ("code" in line) report(line);
    else if (seen.has(line.customId))
      report(lineError(raw.index, "duplicate_custom_id", `custom_id '${line.customId.slice(0, 64)}' is used by an earlier line.`, "custom_id"));
    else seen.add(line.customId);
  }
  if (total === 0) errors.push({ code: "empty_file", message: "The input file holds no requests.", line: null, param: null });
  if (total > limits.maxLines) {
    errors.push({
      code: "too_many_requests",
      message: `The input file holds ${total} requests; a batch takes at most ${limits.maxLines}.`,
      line: null,
      param: null,
    });
  }
  if (failed > errors.length && errors.length === limits.maxErrors) {
    errors.push({ code: "more_errors", message: `${failed - limits.maxErrors} more line errors not listed.`, line: null, param: null });
  }
  return { total, errors };
}
