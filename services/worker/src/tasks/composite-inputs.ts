/**
 * A composite model's job as texts for its embedder: which texts it embeds (with which prompt),
 * and how the embedder's rows become the job's scores. Run by the embedder's runner
 * ({@link ModelRunner.submitPrepared}), so these texts batch with every other call on it.
 */
import { vectorsToBytes, type CompositeScoring } from "@shoal/common";
import type { EmbedModelSpec } from "@shoal/common/model-manifest";
import { InputType } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { InputTooLongError } from "../runtime/errors.ts";
import type { EncodeOptions, TextTokenizer } from "../runtime/text-tokenizer.ts";
import { biEncoderScores, zeroShotScores } from "./composite-scoring.ts";
import { promptFor } from "./embed-options.ts";
import { checkInputLimits, type InputLimits, type PreparedInputs } from "./task-inputs.ts";
import type { EncodedInput } from "./task-job.ts";

/** The label descriptions' vectors of a zero-shot classifier, kept once computed (per load). */
export interface LabelVectorCache {
  get(): Float32Array | undefined;
  set(vectors: Float32Array): void;
}

/** What a composite job needs besides the job: who it is, what it computes, its embedder's limits. */
export interface CompositeContext {
  /** The composite's model id (messages name it, never the text). */
  readonly id: string;
  readonly scoring: CompositeScoring;
  readonly limits: InputLimits;
  /** Zero-shot only. */
  readonly labelVectors?: LabelVectorCache;
}

type Step = Generator<void, PreparedInputs, void>;

function fail(problem: string, encoded: readonly EncodedInput[] = []): PreparedInputs {
  return { ok: false, problem, encoded };
}

/**
 * Tokenizes a composite job for `embedder` (one input at a time, yielding between them):
 * a bi-encoder embeds the query (query prompt) and each document (passage prompt); a zero-shot
 * classifier embeds each text, plus its label descriptions until their vectors are kept (both
 * sides as for classification: see {@link promptFor}). Problems name the input and never echo it.
 */
export function* prepareComposite(ctx: CompositeContext, embedder: EmbedModelSpec, tokenizer: TextTokenizer, envelope: JobEnvelope): Step {
  const task = envelope.task;
  const wants = ctx.scoring.kind === "bi-encoder" ? "rerank" : "classify";
  if (task.case !== wants) return fail(`model '${ctx.id}' is a ${wants} model; it cannot run ${task.case ?? "unknown"} jobs`);
  const encoded: EncodedInput[] = [];
  const tooLong = (err: InputTooLongError, what: string): string =>
    `${what}: ${err.tokens} tokens exceed the limit of ${err.limit} tokens of model '${ctx.id}' (embedder '${embedder.id}'; set truncate to cut long inputs)`;
  function* encodeAll(texts: readonly string[], field: string, opts: EncodeOptions): Generator<void, string | undefined, void> {
    for (const [i, text] of texts.entries()) {
      try {
        encoded.push(tokenizer.encode(text, opts));
      } catch (err) {
        if (err instanceof InputTooLongError) return tooLong(err, `${field}[${i}]`);
        throw err;
      }
      yield;
    }
    return undefined;
  }
  const optsFor = (truncate: boolean, prompt: string | undefined): EncodeOptions => ({ truncate, from: "end", ...(prompt === undefined ? {} : { prompt }) });

  if (task.case === "rerank") {
    const { query, documents, truncate } = task.value;
    const problem = checkInputLimits("documents", documents, ctx.limits, query);
    if (problem !== undefined) return fail(problem);
    if (query.trim() === "") return fail("query: empty text");
    if (documents.length === 0) return fail("documents: at least one is required");
    const empty = documents.findIndex((t) => t.trim() === "");
    if (empty >= 0) return fail(`documents[${empty}]: empty text`);
    const q = yield* encodeAll([query], "query", optsFor(truncate, embedder.prompts.query));
    if (q !== undefined) return fail(q.replace("query[0]", "query"), encoded);
    const d = yield* encodeAll(documents, "documents", optsFor(truncate, embedder.prompts.passage));
    if (d !== undefined) return fail(d, encoded);
    return { ok: true, encoded, shape: (rows, all) => rerankOutput(rows, embedder.dimensions, all) };
  }
  if (task.case !== "classify" || ctx.scoring.kind !== "zero-shot") return fail(`model '${ctx.id}' cannot run ${task.case ?? "unknown"} jobs`);
  const { scoring } = ctx;
  const { inputs, truncate } = task.value;
  const problem = checkInputLimits("inputs", inputs, ctx.limits);
  if (problem !== undefined) return fail(problem);
  if (inputs.length === 0) return fail("inputs: at least one is required");
  const empty = inputs.findIndex((t) => t.trim() === "");
  if (empty >= 0) return fail(`inputs[${empty}]: empty text`);
  const prompt = promptFor(embedder, InputType.CLASSIFICATION);
  const t = yield* encodeAll(inputs, "inputs", optsFor(truncate, prompt));
  if (t !== undefined) return fail(t, encoded);
  const cache = ctx.labelVectors;
  // The descriptions ride along with the texts until their vectors are kept (the first job after a load).
  const withLabels = cache?.get() === undefined;
  if (withLabels) {
    const l = yield* encodeAll(
      scoring.labels.map((x) => x.description),
      "labels",
      optsFor(true, prompt),
    );
    if (l !== undefined) return fail(l, encoded);
  }
  const width = embedder.dimensions;
  return {
    ok: true,
    encoded,
    shape: (rows) => {
      const texts = rows.subarray(0, inputs.length * width);
      let labels = cache?.get();
      if (labels === undefined || withLabels) {
        labels = rows.slice(inputs.length * width);
        cache?.set(labels);
      }
      const scores = zeroShotScores(texts, labels, width, scoring.temperature);
      const textInputs = encoded.slice(0, inputs.length);
      return {
        case: "scores",
        value: {
          perInput: scoring.labels.length,
          scores: vectorsToBytes(scores),
          tokenCounts: textInputs.map((e) => e.tokenCount),
          truncated: indexesWhere(textInputs, (e) => e.truncated),
        },
      };
    },
  };
}

/** Rerank scores from [query, ...documents] rows; a pair's tokens are the query's plus the document's. */
function rerankOutput(rows: Float32Array, width: number, encoded: readonly EncodedInput[]) {
  const [query, ...docs] = encoded;
  return {
    case: "scores" as const,
    value: {
      perInput: 1,
      scores: vectorsToBytes(biEncoderScores(rows, width)),
      tokenCounts: docs.map((d) => d.tokenCount + (query?.tokenCount ?? 0)),
      truncated: indexesWhere(docs, (d) => d.truncated || query?.truncated === true),
    },
  };
}

function indexesWhere<T>(items: readonly T[], pred: (item: T) => boolean): number[] {
  const out: number[] = [];
  items.forEach((item, i) => {
    if (pred(item)) out.push(i);
  });
  return out;
}
