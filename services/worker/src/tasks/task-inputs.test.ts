import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { readModelDir, type ModelSpec } from "@shoal/common/model-manifest";
import { JobEnvelopeSchema, type JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { generatedModelDir } from "../runtime/test-models.ts";
import { createTextTokenizer, type TextTokenizer } from "../runtime/text-tokenizer.ts";
import { prepareInputs, prepareSteps, type PreparedInputs } from "./task-inputs.ts";

type Task = MessageInitShape<typeof JobEnvelopeSchema>["task"];
const envelope = (task: Task): JobEnvelope => create(JobEnvelopeSchema, { jobId: "j", model: "m", attempt: 1, task });
const embed = (inputs: string[], truncate = true): Task => ({ case: "embed", value: { inputs, truncate, normalize: true } });

/** Runs the steps to the end, counting how often they yielded. */
function drive(steps: Generator<void, PreparedInputs, void>): { prepared: PreparedInputs; yields: number } {
  let yields = 0;
  for (;;) {
    const step = steps.next();
    if (step.done) return { prepared: step.value, yields };
    yields += 1;
  }
}

describe("prepareInputs / prepareSteps (real generated tokenizers)", () => {
  let embedder: { spec: ModelSpec; tok: TextTokenizer };
  let reranker: { spec: ModelSpec; tok: TextTokenizer };
  before(async () => {
    const load = async (preset: "tiny" | "tiny-rerank"): Promise<{ spec: ModelSpec; tok: TextTokenizer }> => {
      const spec = await readModelDir(await generatedModelDir(preset));
      return { spec, tok: await createTextTokenizer(spec) };
    };
    [embedder, reranker] = await Promise.all([load("tiny"), load("tiny-rerank")]);
  });

  it("yields once per input and ends with what prepareInputs returns at once", () => {
    const texts = ["the first text", "a second, longer text about tides and shoals", "third"];
    const stepped = drive(prepareSteps(embedder.spec, embedder.tok, envelope(embed(texts))));
    const direct = prepareInputs(embedder.spec, embedder.tok, envelope(embed(texts)));
    assert.equal(stepped.yields, 3);
    assert.ok(stepped.prepared.ok && direct.ok);
    assert.deepEqual(
      stepped.prepared.encoded.map((e) => [...e.ids]),
      direct.encoded.map((e) => [...e.ids]),
    );
    assert.deepEqual(
      stepped.prepared.encoded.map((e) => e.tokenCount),
      direct.encoded.map((e) => e.tokenCount),
    );
    assert.ok(direct.encoded[1]!.tokenCount > direct.encoded[2]!.tokenCount);
  });

  it("names the input at fault and never echoes it", () => {
    const secret = "classified ".repeat(400);
    const cases: Array<[Task, RegExp]> = [
      [embed([]), /^inputs: at least one is required$/],
      [embed(["fine", "  "]), /^inputs\[1\]: empty text$/],
      [
        embed(["fine", secret], false),
        /^inputs\[1\]: \d+ tokens exceed the limit of \d+ tokens of model '[a-z0-9-]+' \(set truncation to START or END to cut long inputs\)$/,
      ],
      [{ case: "rerank", value: { query: "q", documents: ["d"], truncate: true } }, /is a embed model; it cannot run rerank jobs/],
      [{ case: undefined }, /no task this worker can run/],
    ];
    for (const [task, problem] of cases) {
      const prepared = prepareInputs(embedder.spec, embedder.tok, envelope(task));
      assert.equal(prepared.ok, false);
      assert.ok(!prepared.ok);
      assert.match(prepared.problem, problem);
      assert.ok(!prepared.problem.includes("classified"));
    }
  });

  it("stops at the first input that is too long; what came before stays counted", () => {
    const { prepared, yields } = drive(prepareSteps(embedder.spec, embedder.tok, envelope(embed(["ok one", "ok two", "word ".repeat(2_000), "never"], false))));
    assert.equal(prepared.ok, false);
    assert.equal(prepared.encoded.length, 2);
    assert.equal(yields, 2);
  });

  it("rerank: one pair per document, query first, with token types; empty query or document refused", () => {
    const rerank = (query: string, documents: string[]): Task => ({ case: "rerank", value: { query, documents, truncate: true } });
    const { prepared, yields } = drive(prepareSteps(reranker.spec, reranker.tok, envelope(rerank("what is a shoal", ["a group of fish", "a sandbank"]))));
    assert.ok(prepared.ok);
    assert.equal(yields, 2);
    for (const pair of prepared.encoded) {
      assert.ok(pair.typeIds !== undefined && pair.typeIds.length === pair.ids.length);
      assert.ok([...pair.typeIds].includes(1), "the document's tokens have type 1");
    }
    assert.match((prepareInputs(reranker.spec, reranker.tok, envelope(rerank(" ", ["d"]))) as { problem: string }).problem, /^query: empty text$/);
    assert.match((prepareInputs(reranker.spec, reranker.tok, envelope(rerank("q", ["d", ""]))) as { problem: string }).problem, /^documents\[1\]: empty text$/);
  });
});
