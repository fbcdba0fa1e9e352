/** A model directory, manifest, tokenizer or ONNX file could not be loaded. */
export class ModelLoadError extends Error {
  override readonly name = "ModelLoadError";
  /** The directory or file that failed to load. */
  readonly path: string;
  /** Every problem found, each naming the field or file it concerns. */
  readonly problems: readonly string[];

  constructor(path: string, problems: readonly string[], options?: { cause?: unknown }) {
    const list = problems.length === 1 ? ` ${problems[0]}` : `\n${problems.map((p) => `  - ${p}`).join("\n")}`;
    super(`cannot load model at ${path}:${list}`, options);
    this.path = path;
    this.problems = Object.freeze([...problems]);
  }
}
