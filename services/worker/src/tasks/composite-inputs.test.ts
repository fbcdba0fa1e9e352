import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { bytesToVectors, type CompositeScoring } from "@shoal/common";
import { readModelDir, type EmbedModelSpec } from "@shoal/common/model-manifest";
import { JobEnvelopeSchema, type JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { generatedModelDir } from "../runtime/test-models.ts";
import { createTextTokenizer, type TextTokenizer } from "../runtime/text-tokenizer.ts";
import { prepareComposite, type CompositeContext } from "./composite-inputs.ts";
import { NO_INPUT_LIMITS, type PreparedInputs } from "./task-inputs.ts";

type Task = MessageInitShape<typeof JobEnvelopeSchema>["task"];
const envelope = (task: Task): JobEnvelope => create(JobEnvelopeSchema, { jobId: "j", model: "c", attempt: 1, task });
const rerank = (query: string, documents: string[], truncate = true): Task => ({ case: "rerank", value: { query, documents, truncate } });
const classify = (inputs: string[], truncate = true): Task => ({ case: "classify", value: { inputs, truncate } });

function drive(steps: Generator<void, PreparedInputs, void>): PreparedInputs {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

const BI: CompositeScoring = { kind: "bi-encoder", embedder: "tiny" };
const ZS: CompositeScoring = {
  kind: "zero-shot",
  embedder: "tiny",
  temperature: 0.05,
  labels: [
    { name: "a", description: "about apples" },
    { name: "b", description: "about boats" },
    { name: "c", description: "about clouds" },
  ],
};

describe("composite inputs (a real generated tokenizer)", () => {
  let e5Like: EmbedModelSpec;
  let bgeLike: EmbedModelSpec;
  let tok: TextTokenizer;
  before(async () => {
    const spec = await readModelDir(await generatedModelDir("tiny"));
    assert.equal(spec.task, "embed");
    tok = await createTextTokenizer(spec);
    e5Like = { ...(spec as EmbedModelSpec), prompts: { query: "query: ", passage: "passage: " } };
    bgeLike = { ...(spec as EmbedModelSpec), prompts: { query: "represent this for search: ", passage: undefined } };
  });
  const ids = (text: string): number[] => [...tok.encode(text, { truncate: true }).ids];

  it("bi-encoder: the query with the query prompt, each document with the passage prompt; scores are cosines; a pair's tokens are both", () => {
    const ctx: CompositeContext = { id: "rank", scoring: BI, limits: NO_INPUT_LIMITS };
    const p = drive(prepareComposite(ctx, e5Like, tok, envelope(rerank("what is a shoal", ["fish swim together", "bread"]))));
    assert.ok(p.ok);
    assert.equal(p.encoded.length, 3);
    assert.deepEqual([...p.encoded[0]!.ids], ids("query: what is a shoal"));
    assert.deepEqual([...p.encoded[1]!.ids], ids("passage: fish swim together"));
    const w = e5Like.dimensions;
    const rows = new Float32Array(3 * w);
    rows[0] = 1; // query (1, 0, ...)
    rows[w] = 2; // document 0: same direction
    rows[2 * w + 1] = 1; // document 1: orthogonal
    const out = p.shape(rows, p.encoded);
    assert.equal(out.case, "scores");
    const v = out.value as { perInput: number; scores: Uint8Array; tokenCounts: number[] };
    assert.equal(v.perInput, 1);
    assert.deepEqual([...bytesToVectors(v.scores)], [1, 0]);
    assert.deepEqual(v.tokenCounts, [p.encoded[0]!.tokenCount + p.encoded[1]!.tokenCount, p.encoded[0]!.tokenCount + p.encoded[2]!.tokenCount]);
  });

  it("zero-shot: the first job carries the label descriptions and keeps their vectors; later jobs embed only their texts", () => {
    let kept: Float32Array | undefined;
    const ctx: CompositeContext = {
      id: "cls",
      scoring: ZS,
      limits: NO_INPUT_LIMITS,
      labelVectors: {
        get: () => kept,
        set: (v) => {
          kept = v;
        },
      },
    };
    const w = e5Like.dimensions;
    const first = drive(prepareComposite(ctx, e5Like, tok, envelope(classify(["i like boats"]))));
    assert.ok(first.ok);
    assert.equal(first.encoded.length, 1 + 3);
    // Classification uses the query prompt on both sides when the model has a passage prompt too (E5's card).
    assert.deepEqual([...first.encoded[0]!.ids], ids("query: i like boats"));
    assert.deepEqual([...first.encoded[2]!.ids], ids("query: about boats"));
    const rows = new Float32Array(4 * w);
    rows[1] = 1; // the text points along axis 1
    rows[w + 0] = 1; // label a: axis 0
    rows[2 * w + 1] = 1; // label b: axis 1
    rows[3 * w + 2] = 1; // label c: axis 2
    const out = first.shape(rows, first.encoded);
    const v = out.value as { perInput: number; scores: Uint8Array; tokenCounts: number[] };
    const s = bytesToVectors(v.scores);
    assert.equal(v.perInput, 3);
    assert.deepEqual(v.tokenCounts, [first.encoded[0]!.tokenCount]);
    assert.ok(s[1]! > 0.99 && Math.abs(s[0]! + s[1]! + s[2]! - 1) < 1e-6);
    assert.equal(kept?.length, 3 * w);

    const second = drive(prepareComposite(ctx, e5Like, tok, envelope(classify(["clouds", "apples"]))));
    assert.ok(second.ok);
    assert.equal(second.encoded.length, 2, "label vectors are kept, not embedded again");
    const rows2 = new Float32Array(2 * w);
    rows2[2] = 1;
    rows2[w] = 1;
    const s2 = bytesToVectors((second.shape(rows2, second.encoded).value as { scores: Uint8Array }).scores);
    assert.ok(s2[2]! > 0.99 && s2[3]! > 0.99);
  });

  it("zero-shot over a query-only prompt (BGE): texts and descriptions go without a prompt", () => {
    const ctx: CompositeContext = { id: "cls", scoring: ZS, limits: NO_INPUT_LIMITS };
    const p = drive(prepareComposite(ctx, bgeLike, tok, envelope(classify(["i like boats"]))));
    assert.ok(p.ok);
    assert.deepEqual([...p.encoded[0]!.ids], ids("i like boats"));
  });

  it("bad input: the wrong task, empty texts, limits and too-long inputs name the field and the model, never the text", () => {
    const bi: CompositeContext = { id: "rank", scoring: BI, limits: { maxInputs: 2, maxInputChars: 100_000, maxRequestBytes: 1 << 20 } };
    const problem = (ctx: CompositeContext, task: Task): string => {
      const p = drive(prepareComposite(ctx, e5Like, tok, envelope(task)));
      assert.equal(p.ok, false);
      return (p as { problem: string }).problem;
    };
    assert.match(problem(bi, classify(["x"])), /model 'rank' is a rerank model; it cannot run classify jobs/);
    assert.match(problem(bi, rerank("q", ["a", " "])), /^documents\[1\]: empty text$/);
    assert.match(problem(bi, rerank(" ", ["a"])), /^query: empty text$/);
    assert.match(problem(bi, rerank("q", ["a", "b", "c"])), /documents: 3 texts exceed the limit of 2/);
    const long = "secret ".repeat(2000);
    const msg = problem(bi, rerank("q", ["fine", long], false));
    assert.match(msg, /^documents\[1\]: \d+ tokens exceed the limit of \d+ tokens of model 'rank' \(embedder '.+'; set truncate/);
    assert.doesNotMatch(msg, /secret/);
    const zs: CompositeContext = { id: "cls", scoring: ZS, limits: NO_INPUT_LIMITS };
    assert.match(problem(zs, rerank("q", ["a"])), /model 'cls' is a classify model; it cannot run rerank jobs/);
    assert.match(problem(zs, classify([])), /inputs: at least one is required/);
  });
});
