import { type BatchLine, parseLine, type RawLine, validateLines } from "./batch-lines.ts";
import { type BatchRecord, type ChunkRef, initialProgress, lineRequestId, type ProgressRecord, TERMINAL } from "./batch-records.ts";

/** What became of one request: an HTTP answer (200 → output file, else error file) or a failure with none. */
export type LineOutcome =
  | { readonly kind: "response"; readonly statusCode: number; readonly body: unknown }
  | { readonly kind: "error"; readonly code: string; readonly message: string }
  /** The run was stopped while the request ran: not answered, done again by the next run. */
  | { readonly kind: "aborted" };

export interface RunLimits {
  /** Requests of one batch in flight at once. */
  readonly maxLinesInFlight: number;
  /** Largest chunk written to the files topic. */
  readonly chunkBytes: number;
  /** Longest time between checkpoints while lines complete. */
  readonly checkpointMs: number;
  readonly maxLines: number;
  readonly maxErrors: number;
}

/** What a run needs from the world: Kafka, the inference path and a clock, behind functions. */
export interface RunDeps {
  readonly batch: BatchRecord;
  /** Names the writer of each snapshot. */
  readonly owner: string;
  readonly limits: RunLimits;
  /** The input file's lines from its start; undefined when the file is gone (deleted, expired). */
  lines(): AsyncIterable<RawLine> | undefined;
  /** Runs one request to its final outcome (retries are the caller's); `signal` stops it. */
  call(line: BatchLine, signal: AbortSignal): Promise<LineOutcome>;
  /** Writes one chunk of the output or error file; resolves with where it lies. */
  writeChunk(kind: "output" | "error", bytes: Buffer): Promise<ChunkRef>;
  /** Writes a snapshot (resolves once it is durable). */
  save(progress: ProgressRecord): Promise<void>;
  /** Whether a cancel has been asked for. */
  cancelled(): boolean;
  nowMs(): number;
}

const seconds = (ms: number): number => Math.floor(ms / 1000);

/** One answered line as it goes into the output or error file. */
export function resultLine(batchId: string, line: BatchLine, outcome: Exclude<LineOutcome, { kind: "aborted" }>): { kind: "output" | "error"; text: string } {
  const id = lineRequestId(batchId, line.index);
  if (outcome.kind === "error") {
    return { kind: "error", text: JSON.stringify({ id, custom_id: line.customId, response: null, error: { code: outcome.code, message: outcome.message } }) };
  }
  const response = { status_code: outcome.statusCode, request_id: `req_${id.slice("batch_req_".length)}`, body: outcome.body };
  return { kind: outcome.statusCode === 200 ? "output" : "error", text: JSON.stringify({ id, custom_id: line.customId, response, error: null }) };
}

/** Splits `bytes` into pieces of at most `size`. */
export function chunksOf(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}

/**
 * Runs one batch from `start` (its last snapshot; undefined: from the beginning) until it is final
 * or `stop` fires. Validates the input first, then runs its requests with at most
 * `maxLinesInFlight` in flight. Answers are written in input order: a line is written once every
 * line before it is answered, so a snapshot's `nextLine` says exactly which lines its chunks hold.
 * A snapshot is saved after its chunks are written; a stopped run saves what it finished. On
 * cancel, no new request starts, the ones in flight finish and the batch ends `cancelled`; past
 * `expires_at` the same, and the lines never run go to the error file as `batch_expired`.
 * Resolves with the last snapshot saved.
 */
export async function runBatch(deps: RunDeps, start: ProgressRecord | undefined, stop: AbortSignal): Promise<ProgressRecord> {
  const b = deps.batch;
  let p: ProgressRecord = { ...(start ?? initialProgress(deps.owner)), owner: deps.owner };
  if (TERMINAL.has(p.status)) return p;
  const save = async (next: ProgressRecord): Promise<ProgressRecord> => {
    await deps.save(next);
    p = next;
    return next;
  };
  if (p.status === "validating") {
    const now = seconds(deps.nowMs());
    if (deps.cancelled()) return save({ ...p, status: "cancelled", cancelledAt: now });
    const lines = deps.lines();
    if (lines === undefined) {
      return save({
        ...p,
        status: "failed",
        failedAt: now,
        errors: [{ code: "invalid_file", message: `input file ${b.inputFileId} no longer exists`, line: null, param: "input_file_id" }],
      });
    }
    const checked = await validateLines(lines, b.endpoint, deps.limits);
    if (stop.aborted) return p;
    if (checked.errors.length > 0) return save({ ...p, status: "failed", failedAt: seconds(deps.nowMs()), errors: checked.errors });
    p = await save({ ...p, status: "in_progress", total: checked.total, inProgressAt: seconds(deps.nowMs()) });
  }
  return runLines(deps, p, stop, save);
}

type Ending = "done" | "cancelled" | "expired" | "stopped";

async function runLines(deps: RunDeps, from: ProgressRecord, stop: AbortSignal, save: (p: ProgressRecord) => Promise<ProgressRecord>): Promise<ProgressRecord> {
  const b = deps.batch;
  const limits = deps.limits;
  let p = from;
  // Answers not yet written, in input order: `order` lists the lines submitted, `answers` holds theirs.
  const order: BatchLine[] = [];
  const answers = new Map<number, Exclude<LineOutcome, { kind: "aborted" }>>();
  const inFlight = new Set<Promise<void>>();
  const calls = new AbortController();
  const onStop = (): void => calls.abort(stop.reason);
  stop.addEventListener("abort", onStop, { once: true });
  let out: string[] = [];
  let err: string[] = [];
  let buffered = 0;
  let nextLine = p.nextLine;
  let completed = p.completed;
  let failed = p.failed;
  let lastSave = deps.nowMs();
  let flushing: Promise<void> = Promise.resolve();
  // A flush that failed lost its lines' answers: the run cannot go on (the next resumes from the last snapshot).
  let broken: unknown;

  /** Moves the answered head of `order` into the buffers. */
  const emit = (): void => {
    while (order.length > 0) {
      const head = order[0]!;
      const answer = answers.get(head.index);
      if (answer === undefined) return;
      order.shift();
      answers.delete(head.index);
      const r = resultLine(b.id, head, answer);
      (r.kind === "output" ? out : err).push(`${r.text}\n`);
      buffered += Buffer.byteLength(r.text) + 1;
      if (r.kind === "output") completed++;
      else failed++;
      nextLine = head.index + 1;
    }
  };

  /** Writes the buffers' chunks, then a snapshot naming them (one flush at a time, in order). */
  const flush = (extra: Partial<ProgressRecord> = {}): Promise<void> => {
    if (broken !== undefined) return Promise.reject(broken);
    const taken = { out: out.join(""), err: err.join(""), nextLine, completed, failed };
    out = [];
    err = [];
    buffered = 0;
    lastSave = deps.nowMs();
    flushing = flushing.then(async () => {
      const outRefs: ChunkRef[] = [];
      for (const c of chunksOf(Buffer.from(taken.out), limits.chunkBytes)) outRefs.push(await deps.writeChunk("output", c));
      const errRefs: ChunkRef[] = [];
      for (const c of chunksOf(Buffer.from(taken.err), limits.chunkBytes)) errRefs.push(await deps.writeChunk("error", c));
      p = await save({
        ...p,
        ...extra,
        nextLine: taken.nextLine,
        completed: taken.completed,
        failed: taken.failed,
        output: [...p.output, ...outRefs],
        errorChunks: [...p.errorChunks, ...errRefs],
      });
    });
    flushing.catch((e: unknown) => {
      broken ??= e;
    });
    return flushing;
  };

  const expired = (): boolean => deps.nowMs() >= b.expiresAt * 1000;
  let ending: Ending = "done";
  const lines = deps.lines();
  const iterator = lines?.[Symbol.asyncIterator]();
  try {
    if (iterator === undefined) throw new Error(`input file ${b.inputFileId} no longer exists`);
    for (;;) {
      if (broken !== undefined) throw broken;
      if (stop.aborted) ending = "stopped";
      else if (deps.cancelled()) ending = "cancelled";
      else if (expired()) ending = "expired";
      if (ending !== "done") break;
      while (inFlight.size >= limits.maxLinesInFlight) await Promise.race(inFlight);
      if (stop.aborted || deps.cancelled() || expired()) continue;
      const next = await iterator.next();
      if (next.done === true) break;
      const raw = next.value;
      if (raw.index < from.nextLine || raw.text.trim() === "") continue;
      const line = parseLine(raw, b.endpoint);
      // Validated before the run started; a file that changed under it is not possible (files are immutable).
      if ("code" in line) throw new Error(`line ${raw.index + 1} no longer parses: ${line.message}`);
      order.push(line);
      const task: Promise<void> = deps.call(line, calls.signal).then((outcome) => {
        inFlight.delete(task);
        if (outcome.kind === "aborted" || stop.aborted) return;
        answers.set(line.index, outcome);
        emit();
        if (buffered >= limits.chunkBytes || deps.nowMs() - lastSave >= limits.checkpointMs) void flush().catch(() => undefined);
      });
      inFlight.add(task);
    }
    await Promise.all(inFlight);
    if (ending === "stopped" || stop.aborted) {
      // What finished before the stop is kept; whatever ran on is done again by the next owner.
      await flush().catch(() => undefined);
      return p;
    }
    emit();
    const now = seconds(deps.nowMs());
    if (ending === "expired") {
      // Every line not answered goes to the error file, as OpenAI reports an expired batch's rest.
      const rest = iterator === undefined ? [] : await remaining(iterator, b.endpoint);
      for (const line of [...order, ...rest]) {
        const r = resultLine(b.id, line, {
          kind: "error",
          code: "batch_expired",
          message: "This request could not be executed before the completion window expired.",
        });
        err.push(`${r.text}\n`);
        failed++;
        nextLine = line.index + 1;
      }
      await flush({ status: "expired", expiredAt: now });
      return p;
    }
    if (ending === "cancelled") {
      await flush({ status: "cancelled", cancelledAt: now });
      return p;
    }
    await flush({ status: "finalizing", finalizingAt: now });
    return await save({ ...p, status: "completed", completedAt: seconds(deps.nowMs()) });
  } finally {
    stop.removeEventListener("abort", onStop);
    calls.abort();
    await iterator?.return?.(undefined);
  }
}

/** The requests still to come from `iterator` (an expired batch's lines never run). */
async function remaining(iterator: AsyncIterator<RawLine>, endpoint: string): Promise<BatchLine[]> {
  const out: BatchLine[] = [];
  for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) {
    if (next.value.text.trim() === "") continue;
    const line = parseLine(next.value, endpoint);
    if (!("code" in line)) out.push(line);
  }
  return out;
}
