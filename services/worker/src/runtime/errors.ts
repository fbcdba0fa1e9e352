/**
 * Typed errors raised by the runtime layer. Callers branch on the class (and `reason` for
 * {@link InferenceError}), never on message text.
 */

export { ModelLoadError } from "@shoal/common/model-manifest";

/** A text has more tokens than the model accepts and the caller asked not to truncate. */
export class InputTooLongError extends Error {
  override readonly name = "InputTooLongError";
  /** Tokens in the text, special tokens included. */
  readonly tokens: number;
  /** The model's `maxSequenceLength`. */
  readonly limit: number;

  constructor(tokens: number, limit: number) {
    super(`input has ${tokens} tokens, more than the model's limit of ${limit}`);
    this.tokens = tokens;
    this.limit = limit;
  }
}

/**
 * Why an inference run failed:
 * - `run-failed`: ONNX Runtime rejected the inputs or failed during the forward pass;
 * - `bad-output`: the model's output does not match its manifest (shape, dimensions);
 * - `invalid-input`: the request itself is malformed (empty group, ragged shapes);
 * - `thread-crashed`: the inference thread died while the run was in flight;
 * - `closed`: the inference threads were closed before the run finished, or no thread is left to run it.
 */
export type InferenceErrorReason = "run-failed" | "bad-output" | "invalid-input" | "thread-crashed" | "closed";

/** An inference run did not produce vectors. */
export class InferenceError extends Error {
  override readonly name = "InferenceError";
  readonly reason: InferenceErrorReason;

  constructor(reason: InferenceErrorReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}
