/**
 * Typed errors of the residency manager. Callers branch on the class, never on message text.
 * A failed load rejects with the loader's own error (not wrapped), so a missing file stays a
 * `ModelLoadError` from the runtime.
 */

/** A model that can never fit: bigger than the whole budget, or than what catalog-pinned models leave of it. */
export class ModelTooLargeError extends Error {
  override readonly name = "ModelTooLargeError";
  readonly model: string;
  /** Estimated resident bytes of the model. */
  readonly bytes: number;
  readonly budgetBytes: number;
  /** Bytes held by catalog-pinned models (never evicted) when the error was raised; 0 when the model exceeds the budget itself. */
  readonly pinnedBytes: number;

  constructor(model: string, bytes: number, budgetBytes: number, pinnedBytes = 0) {
    super(
      pinnedBytes > 0 && bytes <= budgetBytes
        ? `model "${model}" needs ${bytes} bytes but only ${budgetBytes - pinnedBytes} of the ${budgetBytes}-byte residency budget are not held by catalog-pinned models`
        : `model "${model}" needs ${bytes} bytes, more than the whole ${budgetBytes}-byte residency budget`,
    );
    this.model = model;
    this.bytes = bytes;
    this.budgetBytes = budgetBytes;
    this.pinnedBytes = pinnedBytes;
  }
}

/** The manager was closed: pending and later acquires reject with this. */
export class ResidencyClosedError extends Error {
  override readonly name = "ResidencyClosedError";

  constructor(model: string) {
    super(`model residency is closed; cannot acquire "${model}"`);
  }
}
