import { vectorsToBytes } from "@shoal/common";
import type { ModelSpec } from "@shoal/common/model-manifest";
import type { EmbedTask, JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { applyActivation } from "../runtime/activations.ts";
import { InputTooLongError } from "../runtime/errors.ts";
import type { TextTokenizer } from "../runtime/text-tokenizer.ts";
import { dimensionsProblem, encodeOptions, promptFor, shapeVectors } from "./embed-options.ts";
import type { EncodedInput, OutputShaper } from "./task-job.ts";
import { tokenizeOutput } from "./tokenize-output.ts";

/**
 * A job's inputs, ready for the batcher, and how its rows become its output. A job with no
 * inputs to compute (Tokenize) has `encoded` empty and a shaper that needs no rows.
 */
export type PreparedInputs =
  | { readonly ok: true; readonly encoded: readonly EncodedInput[]; readonly shape: OutputShaper }
  /** The job cannot run as sent (INVALID_ARGUMENT); `encoded` holds what was tokenized so far. */
  | { readonly ok: false; readonly problem: string; readonly encoded: readonly EncodedInput[] };

function truncatedIndexes(encoded: readonly EncodedInput[]): number[] {
  const out: number[] = [];
  encoded.forEach((e, i) => {
    if (e.truncated) out.push(i);
  });
  return out;
}

function embedShaper(spec: ModelSpec, task: EmbedTask): OutputShaper {
  const opts = { normalize: task.normalize, dimensions: task.dimensions, types: task.embeddingTypes };
  return (rows, encoded) => ({
    case: "embed",
    value: {
      ...shapeVectors(rows, spec.dimensions, opts),
      tokenCounts: encoded.map((e) => e.tokenCount),
      truncated: truncatedIndexes(encoded),
      maxSequenceLength: spec.maxSequenceLength,
    },
  });
}

function scoresShaper(spec: ModelSpec): OutputShaper {
  return (rows, encoded) => {
    applyActivation(spec, rows);
    return {
      case: "scores",
      value: { perInput: spec.dimensions, scores: vectorsToBytes(rows), tokenCounts: encoded.map((e) => e.tokenCount), truncated: truncatedIndexes(encoded) },
    };
  };
}

/** The worker's own input limits (the gateway's, enforced again: a forged record cannot bypass them). */
export interface InputLimits {
  readonly maxInputs: number;
  readonly maxInputChars: number;
  readonly maxRequestBytes: number;
}

/** No limits (tests, tools). */
export const NO_INPUT_LIMITS: InputLimits = { maxInputs: Infinity, maxInputChars: Infinity, maxRequestBytes: Infinity };

/** The first limit `texts` break, as a message that names it and never echoes the text; undefined when none. */
export function checkInputLimits(field: string, texts: readonly string[], limits: InputLimits, extra?: string): string | undefined {
  if (texts.length > limits.maxInputs) return `${field}: ${texts.length} texts exceed the limit of ${limits.maxInputs} per request`;
  // UTF-8 bytes are at most 3 per UTF-16 code unit: the exact count is only taken when that bound is over the limit.
  let units = extra?.length ?? 0;
  for (const [i, text] of texts.entries()) {
    if (text.length > limits.maxInputChars) return `${field}[${i}]: ${text.length} characters exceed the limit of ${limits.maxInputChars} characters per input`;
    units += text.length;
  }
  if (extra !== undefined && extra.length > limits.maxInputChars)
    return `query: ${extra.length} characters exceed the limit of ${limits.maxInputChars} characters per input`;
  if (units * 3 > limits.maxRequestBytes) {
    let bytes = extra === undefined ? 0 : Buffer.byteLength(extra);
    for (const text of texts) bytes += Buffer.byteLength(text);
    if (bytes > limits.maxRequestBytes) return `inputs: ${bytes} bytes of text exceed the limit of ${limits.maxRequestBytes} bytes per request`;
  }
  return undefined;
}

const TASK_OF_CASE = { embed: "embed", rerank: "rerank", classify: "classify", tokenize: undefined } as const;

/**
 * Tokenizes a job's inputs for `spec`'s model: texts for embed and classify, (query, document)
 * pairs for rerank. Input problems (empty text, too long without truncate, a task the model does
 * not run) come back as `ok: false` with a message that names the input and never echoes it.
 */
export function prepareInputs(spec: ModelSpec, tokenizer: TextTokenizer, envelope: JobEnvelope, limits: InputLimits = NO_INPUT_LIMITS): PreparedInputs {
  const steps = prepareSteps(spec, tokenizer, envelope, limits);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/** {@link prepareInputs} one input at a time: yields after each, so a long job can be spread over several turns. */
export function* prepareSteps(
  spec: ModelSpec,
  tokenizer: TextTokenizer,
  envelope: JobEnvelope,
  limits: InputLimits = NO_INPUT_LIMITS,
): Generator<void, PreparedInputs, void> {
  const task = envelope.task;
  if (task.case === undefined) return { ok: false, problem: "job carries no task this worker can run", encoded: [] };
  const needs = TASK_OF_CASE[task.case];
  if (needs !== undefined && needs !== spec.task) {
    return { ok: false, problem: `model '${spec.id}' is a ${spec.task} model; it cannot run ${task.case} jobs`, encoded: [] };
  }
  const encoded: EncodedInput[] = [];
  const tooLong = (err: InputTooLongError, what: string): string =>
    `${what}: ${err.tokens} tokens exceed the limit of ${err.limit} tokens of model '${spec.id}' (${task.case === "embed" || task.case === "tokenize" ? "set truncation to START or END" : "set truncate"} to cut long inputs)`;
  function* encodeAll(count: number, field: string, one: (i: number) => EncodedInput): Generator<void, string | undefined, void> {
    if (count === 0) return `${field}: at least one is required`;
    for (let i = 0; i < count; i++) {
      try {
        encoded.push(one(i));
      } catch (err) {
        if (err instanceof InputTooLongError) return tooLong(err, `${field}[${i}]`);
        throw err;
      }
      yield;
    }
    return undefined;
  }
  let problem: string | undefined;
  switch (task.case) {
    case "embed":
    case "classify": {
      const { inputs, truncate } = task.value;
      const embed = task.case === "embed" ? task.value : undefined;
      const empty = inputs.findIndex((t) => t.trim() === "");
      problem = checkInputLimits("inputs", inputs, limits);
      if (embed !== undefined && spec.task === "embed") problem ??= dimensionsProblem(spec, embed.dimensions);
      if (problem !== undefined) return { ok: false, problem, encoded };
      const opts = embed === undefined ? { truncate } : encodeOptions(embed.truncation, truncate, promptFor(spec, embed.inputType));
      problem = empty >= 0 ? `inputs[${empty}]: empty text` : yield* encodeAll(inputs.length, "inputs", (i) => tokenizer.encode(inputs[i]!, opts));
      if (problem !== undefined) return { ok: false, problem, encoded };
      const shape = embed !== undefined ? embedShaper(spec, embed) : scoresShaper(spec);
      return { ok: true, encoded, shape };
    }
    case "tokenize": {
      const { inputs, truncation, inputType } = task.value;
      problem = checkInputLimits("inputs", inputs, limits);
      const empty = inputs.findIndex((t) => t.trim() === "");
      if (problem === undefined && inputs.length === 0) problem = "inputs: at least one is required";
      if (problem === undefined && empty >= 0) problem = `inputs[${empty}]: empty text`;
      if (problem !== undefined) return { ok: false, problem, encoded };
      const opts = encodeOptions(truncation, false, promptFor(spec, inputType));
      const explained = [];
      for (const [i, text] of inputs.entries()) {
        try {
          explained.push(tokenizer.explain(text, opts));
        } catch (err) {
          if (err instanceof InputTooLongError) return { ok: false, problem: tooLong(err, `inputs[${i}]`), encoded };
          throw err;
        }
        yield;
      }
      const output = tokenizeOutput(inputs, explained, spec.maxSequenceLength);
      return { ok: true, encoded, shape: () => output };
    }
    case "rerank": {
      const { query, documents, truncate } = task.value;
      const empty = documents.findIndex((t) => t.trim() === "");
      problem = checkInputLimits("documents", documents, limits, query);
      if (problem !== undefined) return { ok: false, problem, encoded };
      if (query.trim() === "") problem = "query: empty text";
      else if (empty >= 0) problem = `documents[${empty}]: empty text`;
      else problem = yield* encodeAll(documents.length, "documents", (i) => tokenizer.encodePair(query, documents[i]!, { truncate }));
      if (problem !== undefined) return { ok: false, problem, encoded };
      return { ok: true, encoded, shape: scoresShaper(spec) };
    }
  }
}
