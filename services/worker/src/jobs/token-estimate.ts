import type { JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";

/** Characters per WordPiece token on English text, on the low side so estimates err high. */
const CHARS_PER_TOKEN = 4;
/** [CLS] and [SEP]; a pair adds one more [SEP]. */
const SPECIAL_TOKENS = 2;

/**
 * Tokens a job will cost, estimated from its characters before tokenizing (which happens later,
 * off the intake's path): enough to decide how many more jobs a worker should take, never used
 * for batching itself.
 */
export function estimateJobTokens(envelope: JobEnvelope, maxSequenceLength: number): number {
  const text = (chars: number): number => Math.min(maxSequenceLength, Math.ceil(chars / CHARS_PER_TOKEN) + SPECIAL_TOKENS);
  const task = envelope.task;
  switch (task.case) {
    case "embed":
    case "classify":
      return task.value.inputs.reduce((n, s) => n + text(s.length), 0);
    case "rerank":
      return task.value.documents.reduce((n, d) => n + text(task.value.query.length + d.length + 1), 0);
    // Tokenize runs no model: it holds no compute a prefetch budget must account for.
    default:
      return 0;
  }
}
