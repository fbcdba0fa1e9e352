import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { readModelDir, type EmbedModelSpec } from "@shoal/common/model-manifest";
import { bytesToVectors } from "@shoal/common";
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema, type EmbedOutput, type TokenizeOutput } from "@shoal/gen/shoal/v1/job_pb.ts";
import { generatedModelDir } from "../runtime/test-models.ts";
import { createTextTokenizer, type TextTokenizer } from "../runtime/text-tokenizer.ts";
import { promptFor, shapeVectors } from "./embed-options.ts";
import { prepareInputs } from "./task-inputs.ts";

type Task = MessageInitShape<typeof JobEnvelopeSchema>["task"];
const envelope = (task: Task) => create(JobEnvelopeSchema, { jobId: "j", model: "m", attempt: 1, task });
const E5 = { query: "query: ", passage: "passage: " };
const BGE = { query: "Represent this sentence for searching relevant passages: ", passage: undefined };

describe("embedding options on the worker (real generated tokenizer)", () => {
  let base: EmbedModelSpec;
  let tok: TextTokenizer;
  before(async () => {
    const spec = await readModelDir(await generatedModelDir("tiny"));
    assert.equal(spec.task, "embed");
    base = spec as EmbedModelSpec;
    tok = await createTextTokenizer(base);
  });
  const withSpec = (over: Partial<EmbedModelSpec>): EmbedModelSpec => ({ ...base, ...over });

  it("input types map to the model's own prompts; a model without prompts ignores them", () => {
    const e5 = withSpec({ prompts: E5 });
    const bge = withSpec({ prompts: BGE });
    const none = withSpec({ prompts: { query: undefined, passage: undefined } });
    const types = [
      InputType.UNSPECIFIED,
      InputType.QUERY,
      InputType.SEARCH_QUERY,
      InputType.DOCUMENT,
      InputType.SEARCH_DOCUMENT,
      InputType.CLASSIFICATION,
      InputType.CLUSTERING,
    ];
    assert.deepEqual(
      types.map((t) => promptFor(e5, t)),
      [undefined, "query: ", "query: ", "passage: ", "passage: ", "query: ", "query: "],
    );
    assert.deepEqual(
      types.map((t) => promptFor(bge, t)),
      [undefined, BGE.query, BGE.query, undefined, undefined, undefined, undefined],
    );
    assert.deepEqual(
      types.map((t) => promptFor(none, t)),
      types.map(() => undefined),
    );
  });

  it("an input type tokenizes exactly as the literal prompt + text with no input type", () => {
    const e5 = withSpec({ prompts: E5 });
    const text = "how do shoals of fish turn together";
    const typed = prepareInputs(e5, tok, envelope({ case: "embed", value: { inputs: [text], inputType: InputType.QUERY } }));
    const literal = prepareInputs(e5, tok, envelope({ case: "embed", value: { inputs: [`query: ${text}`] } }));
    const plain = prepareInputs(e5, tok, envelope({ case: "embed", value: { inputs: [text] } }));
    assert.ok(typed.ok && literal.ok && plain.ok);
    assert.deepEqual([...typed.encoded[0]!.ids], [...literal.encoded[0]!.ids]);
    assert.ok(typed.encoded[0]!.tokenCount > plain.encoded[0]!.tokenCount);
  });

  it("truncation START keeps [CLS], the prompt and the last tokens; END the first; NONE names tokens and limit", () => {
    const e5 = withSpec({ prompts: E5 });
    const limit = e5.maxSequenceLength;
    const words = Array.from({ length: limit + 20 }, (_, i) => `w${i}`).join(" ");
    const whole = tok.encode(`query: ${words}`, { truncate: true });
    assert.equal(whole.tokenCount, limit);
    const run = (truncation: Truncation) =>
      prepareInputs(e5, tok, envelope({ case: "embed", value: { inputs: [words], inputType: InputType.QUERY, truncation } }));
    const end = run(Truncation.END);
    const start = run(Truncation.START);
    assert.ok(end.ok && start.ok);
    assert.deepEqual([...end.encoded[0]!.ids], [...whole.ids]);
    // START: the same frame and prompt, then the text's last tokens.
    const explained = tok.explain(words, { truncate: true, from: "start", prompt: "query: " });
    const ids = [...start.encoded[0]!.ids];
    assert.equal(ids.length, limit);
    assert.deepEqual(ids, [...explained.ids]);
    const prompt = explained.promptTokens;
    assert.ok(prompt >= 2);
    assert.deepEqual(ids.slice(0, 1 + prompt), [...whole.ids].slice(0, 1 + prompt), "[CLS] and the prompt stay");
    assert.equal(ids.at(-1), [...whole.ids].at(-1), "[SEP] stays");
    const kept = limit - 2 - prompt;
    assert.deepEqual(explained.tokens.slice(1 + prompt, -1), explained.allTokens.slice(-1 - kept, -1), "the text's last tokens");
    assert.deepEqual(explained.tokens.slice(0, 1 + prompt), explained.allTokens.slice(0, 1 + prompt));
    assert.ok(start.encoded[0]!.truncated);
    const none = run(Truncation.NONE);
    assert.ok(!none.ok);
    assert.match(none.problem, new RegExp(`^inputs\\[0\\]: \\d+ tokens exceed the limit of ${limit} tokens of model`));
  });

  it("dimensions: refused for a model not trained for it, cut and renormalised for a Matryoshka one", () => {
    const plain = prepareInputs(base, tok, envelope({ case: "embed", value: { inputs: ["a"], dimensions: 8 } }));
    assert.ok(!plain.ok);
    assert.match(plain.problem, /^dimensions: model '.+' was not trained to be truncated \(not Matryoshka\)/);
    const mrl = withSpec({ matryoshka: true });
    const over = prepareInputs(mrl, tok, envelope({ case: "embed", value: { inputs: ["a"], dimensions: base.dimensions + 1 } }));
    assert.ok(!over.ok);
    assert.match(over.problem, /exceeds the \d+ dimensions/);
    const ok = prepareInputs(mrl, tok, envelope({ case: "embed", value: { inputs: ["a", "b"], dimensions: 2, normalize: true } }));
    assert.ok(ok.ok);
    const width = base.dimensions;
    const rows = new Float32Array(2 * width).fill(0);
    rows.set([3, 4, 100], 0);
    rows.set([-1, 0, 5], width);
    const out = ok.shape(rows, ok.encoded);
    assert.equal(out.case, "embed");
    const value = out.value as EmbedOutput;
    assert.equal(value.dimensions, 2);
    // Normalised over all dimensions, cut to 2, normalised again: (3, 4) / 5, (-1, 0).
    const got = Array.from(bytesToVectors(value.vectors));
    for (const [i, x] of [0.6, 0.8, -1, 0].entries()) assert.ok(Math.abs(got[i]! - x) < 1e-6, `${got[i]} vs ${x}`);
  });

  it("several embedding types at once; FLOAT left out leaves no float bytes", () => {
    // float32(-0.8) is -0.800000011920929: (1 - 0.80000001) * 127.5 = 25.4999985 rounds to 25.
    const rows = new Float32Array([0.6, -0.8, 0, 0, 1, 0, 0, 0, 0, 0]);
    const v = shapeVectors(rows, 10, {
      normalize: false,
      dimensions: 0,
      types: [EmbeddingType.INT8, EmbeddingType.UINT8, EmbeddingType.BINARY, EmbeddingType.UBINARY],
    });
    assert.equal(v.dimensions, 10);
    assert.equal((v.vectors as Uint8Array).length, 0);
    assert.deepEqual(Array.from(new Int8Array((v.int8 as Uint8Array).buffer)), [76, -102, 0, 0, 127, 0, 0, 0, 0, 0]);
    assert.deepEqual(Array.from(v.uint8 as Uint8Array), [204, 25, 128, 128, 255, 128, 128, 128, 128, 128]);
    assert.deepEqual(Array.from(v.ubinary as Uint8Array), [0b10001000, 0]);
    assert.deepEqual(Array.from(new Int8Array((v.binary as Uint8Array).buffer)), [8, -128]);
  });

  it("tokenize: the ids Embed would compute, token strings, offsets in the input, prompt and specials marked", () => {
    const e5 = withSpec({ prompts: E5 });
    const text = "Shoals turn, together";
    const prepared = prepareInputs(e5, tok, envelope({ case: "tokenize", value: { inputs: [text], inputType: InputType.QUERY } }));
    assert.ok(prepared.ok);
    assert.equal(prepared.encoded.length, 0, "nothing to compute");
    const out = prepared.shape(new Float32Array(0), []);
    assert.equal(out.case, "tokens");
    const t = (out.value as TokenizeOutput).inputs[0]!;
    assert.deepEqual(t.ids, [...tok.encode(text, { truncate: false, prompt: "query: " }).ids]);
    const prompt = tok.explain(text, { truncate: false, prompt: "query: " }).promptTokens;
    assert.deepEqual(
      t.special,
      t.ids.map((_, i) => i <= prompt || i === t.ids.length - 1),
    );
    const words = t.tokens.map((_, i) => (t.special[i] ? "" : text.slice(t.starts[i], t.ends[i])));
    assert.equal(
      words
        .filter((w) => w !== "")
        .join("|")
        .replaceAll("|", "")
        .replaceAll(" ", ""),
      text.replaceAll(" ", ""),
    );
    assert.equal((out.value as TokenizeOutput).maxSequenceLength, e5.maxSequenceLength);
  });
});
