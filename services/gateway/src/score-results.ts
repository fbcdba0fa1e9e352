import { bytesToVectors } from "@shoal/common";
import { JobStatus, type ScoresOutput } from "@shoal/gen/shoal/v1/job_pb.ts";
import { JobFailedError } from "./errors.ts";

/** A worker's ScoresOutput, checked against what the request asked for. */
export interface ScoreRows {
  /** `count * perInput` activated scores, row-major, in input order. */
  readonly scores: Float32Array;
  readonly perInput: number;
  /** Tokens per input after truncation (the whole pair for rerank). */
  readonly tokenCounts: readonly number[];
  /** Indexes of inputs that were truncated. */
  readonly truncated: ReadonlySet<number>;
}

function wrongShape(): JobFailedError {
  return new JobFailedError(JobStatus.INTERNAL, "worker returned a result of the wrong shape");
}

/**
 * Checks a ScoresOutput for `count` inputs of `perInput` scores each (rerank: 1; classify: the
 * label count): `per_input`, the score count and the token counts must all match, else the call
 * fails with Internal (a worker bug or a model that disagrees with its catalog entry).
 */
export function readScores(out: ScoresOutput, count: number, perInput: number): ScoreRows {
  if (perInput < 1 || out.perInput !== perInput || out.scores.byteLength % 4 !== 0) throw wrongShape();
  const scores = bytesToVectors(out.scores);
  if (scores.length !== count * perInput || out.tokenCounts.length !== count) throw wrongShape();
  return { scores, perInput, tokenCounts: out.tokenCounts, truncated: new Set(out.truncated) };
}

/** How many of `n` results `top_k` keeps: 0 or unset keeps them all. */
export function keepCount(topK: number | undefined, n: number): number {
  return topK === undefined || topK === 0 || topK >= n ? n : topK;
}

/** Sort key: a NaN score (a broken model) sorts last instead of making the order undefined. */
function key(score: number): number {
  return Number.isNaN(score) ? Number.NEGATIVE_INFINITY : score;
}

/** Positions 0..n-1 ordered by score, highest first; ties keep their order (the sort is stable). */
function rankOrder(n: number, scoreAt: (i: number) => number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  return order.sort((a, b) => {
    const ka = key(scoreAt(a));
    const kb = key(scoreAt(b));
    return ka === kb ? 0 : kb > ka ? 1 : -1;
  });
}

/** One RerankResult, as the response carries it. */
export interface RankedDocument {
  readonly index: number;
  readonly score: number;
  /** The document's text when return_documents was set, else "". */
  readonly document: string;
  readonly tokens: number;
  readonly truncated: boolean;
}

export interface RankOptions {
  readonly topK?: number | undefined;
  readonly returnDocuments: boolean;
}

/**
 * Rerank's results: documents by score, highest first (ties keep document order), the best
 * `top_k` kept. `promptTokens` counts every pair the worker ran, kept or not.
 */
export function rankDocuments(rows: ScoreRows, documents: readonly string[], opts: RankOptions): { results: RankedDocument[]; promptTokens: number } {
  let promptTokens = 0;
  for (let i = 0; i < documents.length; i++) promptTokens += rows.tokenCounts[i] ?? 0;
  const order = rankOrder(documents.length, (i) => rows.scores[i * rows.perInput] ?? 0);
  const results = order.slice(0, keepCount(opts.topK, order.length)).map((i) => ({
    index: i,
    score: rows.scores[i * rows.perInput] ?? 0,
    document: opts.returnDocuments ? (documents[i] ?? "") : "",
    tokens: rows.tokenCounts[i] ?? 0,
    truncated: rows.truncated.has(i),
  }));
  return { results, promptTokens };
}

/** One Classification, as the response carries it. */
export interface LabelledInput {
  readonly index: number;
  /** Highest score first. */
  readonly labels: { readonly label: string; readonly score: number }[];
  readonly tokens: number;
  readonly truncated: boolean;
}

/**
 * Classify's results: per input, in input order, its labels by score, highest first (ties keep
 * the model's label order), the best `top_k` kept. `labels` names the scores of a row in order.
 */
export function labelInputs(
  rows: ScoreRows,
  count: number,
  labels: readonly string[],
  topK: number | undefined,
): { classifications: LabelledInput[]; promptTokens: number } {
  const keep = keepCount(topK, labels.length);
  let promptTokens = 0;
  const classifications: LabelledInput[] = [];
  for (let i = 0; i < count; i++) {
    const base = i * rows.perInput;
    const tokens = rows.tokenCounts[i] ?? 0;
    promptTokens += tokens;
    const order = rankOrder(labels.length, (j) => rows.scores[base + j] ?? 0);
    classifications.push({
      index: i,
      labels: order.slice(0, keep).map((j) => ({ label: labels[j] ?? "", score: rows.scores[base + j] ?? 0 })),
      tokens,
      truncated: rows.truncated.has(i),
    });
  }
  return { classifications, promptTokens };
}
