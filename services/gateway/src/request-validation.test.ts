import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { CatalogModel } from "@shoal/common";
import { ClassifyRequestSchema, EmbedRequestSchema, RerankRequestSchema } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { estimateTokens } from "./admission.ts";
import { labelsOf, validateClassify } from "./classify-request.ts";
import { requireModel, validateEmbed, type RequestLimits } from "./embed-request.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";
import { estimateRerankTokens, validateRerank } from "./rerank-request.ts";

const fake = (id: string, spec: Record<string, unknown>): CatalogModel =>
  ({ id, pool: "p", spec: { maxSequenceLength: 128, ...spec }, batching: {} }) as unknown as CatalogModel;

const MODELS = new Map<string, CatalogModel>([
  ["emb", fake("emb", { task: "embed", dimensions: 8, normalize: true })],
  ["rr", fake("rr", { task: "rerank", dimensions: 1, scoreActivation: "sigmoid" })],
  ["cls", fake("cls", { task: "classify", dimensions: 3, labels: ["neg", "neu", "pos"], problemType: "single_label" })],
]);
const LIMITS: RequestLimits = { maxInputsPerRequest: 3, maxInputChars: 10 };

/** Asserts `fn` throws InvalidRequestError whose message matches `message`. */
function invalid(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof InvalidRequestError, `expected InvalidRequestError, got ${String(err)}`);
    assert.match(err.message, message);
    return true;
  });
}

describe("model checks shared by every RPC", () => {
  test("empty id: InvalidArgument naming the field; unknown id: NotFound", () => {
    invalid(() => requireModel("", MODELS, "rerank"), /^model: required$/);
    assert.throws(() => requireModel("nope", MODELS, "classify"), ModelNotFoundError);
  });

  test("a model of another task names its task and the RPC to call", () => {
    invalid(() => requireModel("rr", MODELS, "embed"), /^model 'rr' is a rerank model, not an embedding model; call Rerank$/);
    invalid(() => requireModel("cls", MODELS, "rerank"), /^model 'cls' is a classification model, not a rerank model; call Classify$/);
    invalid(() => requireModel("emb", MODELS, "classify"), /^model 'emb' is an embedding model, not a classification model; call Embed$/);
    assert.equal(requireModel("rr", MODELS, "rerank").id, "rr");
  });
});

describe("validateEmbed", () => {
  const req = (model: string, inputs: string[]) => create(EmbedRequestSchema, { model, inputs });

  test("accepts a valid request and returns the model", () => {
    assert.equal(validateEmbed(req("emb", ["a", "b"]), MODELS, LIMITS).id, "emb");
  });

  test("messages name the input and the limit (unchanged for the OpenAI endpoint)", () => {
    invalid(() => validateEmbed(req("emb", []), MODELS, LIMITS), /^inputs: at least one text is required$/);
    invalid(() => validateEmbed(req("emb", ["a", "b", "c", "d"]), MODELS, LIMITS), /^inputs: 4 texts exceed the limit of 3 per request$/);
    invalid(() => validateEmbed(req("emb", ["a", "  "]), MODELS, LIMITS), /^inputs\[1\]: empty text$/);
    invalid(() => validateEmbed(req("emb", ["a".repeat(11)]), MODELS, LIMITS), /^inputs\[0\]: 11 characters exceed the limit of 10 characters per input$/);
  });

  test("a rerank or classify model is refused with the RPC to call", () => {
    invalid(() => validateEmbed(req("rr", ["a"]), MODELS, LIMITS), /call Rerank/);
    invalid(() => validateEmbed(req("cls", ["a"]), MODELS, LIMITS), /call Classify/);
  });
});

describe("validateRerank", () => {
  const req = (init: { model?: string; query?: string; documents?: string[]; topK?: number }) =>
    create(RerankRequestSchema, { model: "rr", query: "q", documents: ["d"], ...init });

  test("accepts a valid request; top_k of any size is fine", () => {
    assert.equal(validateRerank(req({ documents: ["a", "b", "c"], topK: 99 }), MODELS, LIMITS).id, "rr");
    assert.equal(validateRerank(req({ topK: 0 }), MODELS, LIMITS).id, "rr");
  });

  test("query: required, at most maxInputChars", () => {
    invalid(() => validateRerank(req({ query: "" }), MODELS, LIMITS), /^query: empty text$/);
    invalid(() => validateRerank(req({ query: " \n" }), MODELS, LIMITS), /^query: empty text$/);
    invalid(() => validateRerank(req({ query: "q".repeat(11) }), MODELS, LIMITS), /^query: 11 characters exceed the limit of 10 characters per input$/);
  });

  test("documents: at least one, at most maxInputsPerRequest, each non-empty and within maxInputChars", () => {
    invalid(() => validateRerank(req({ documents: [] }), MODELS, LIMITS), /^documents: at least one document is required$/);
    invalid(() => validateRerank(req({ documents: ["a", "b", "c", "d"] }), MODELS, LIMITS), /^documents: 4 documents exceed the limit of 3 per request$/);
    invalid(() => validateRerank(req({ documents: ["a", ""] }), MODELS, LIMITS), /^documents\[1\]: empty text$/);
    invalid(() => validateRerank(req({ documents: ["a", "b", "x".repeat(12)] }), MODELS, LIMITS), /^documents\[2\]: 12 characters exceed the limit of 10/);
  });

  test("model: checked first; NotFound and task mismatch", () => {
    invalid(() => validateRerank(req({ model: "", query: "" }), MODELS, LIMITS), /^model: required$/);
    assert.throws(() => validateRerank(req({ model: "x" }), MODELS, LIMITS), ModelNotFoundError);
    invalid(() => validateRerank(req({ model: "emb" }), MODELS, LIMITS), /^model 'emb' is an embedding model, not a rerank model; call Embed$/);
  });

  test("the token estimate sums the (query + document) estimate over documents", () => {
    const query = "a".repeat(9);
    const docs = ["b".repeat(3), "c".repeat(300)];
    const pairs = docs.map((d) => estimateTokens([query + d], 128, false));
    assert.deepEqual(pairs, [4 + 2, 103 + 2]);
    assert.equal(estimateRerankTokens(query, docs, 128, false), pairs[0]! + pairs[1]!);
    assert.equal(estimateRerankTokens(query, docs, 64, true), 6 + 64, "each pair capped when truncating");
  });
});

describe("validateClassify", () => {
  const req = (model: string, inputs: string[]) => create(ClassifyRequestSchema, { model, inputs });

  test("accepts a valid request; labels come from the catalog spec", () => {
    const m = validateClassify(req("cls", ["good", "bad"]), MODELS, LIMITS);
    assert.deepEqual(labelsOf(m), ["neg", "neu", "pos"]);
    assert.deepEqual(labelsOf(MODELS.get("rr")!), []);
  });

  test("inputs: the same limits as Embed, named the same way", () => {
    invalid(() => validateClassify(req("cls", []), MODELS, LIMITS), /^inputs: at least one text is required$/);
    invalid(() => validateClassify(req("cls", ["a", "b", "c", "d"]), MODELS, LIMITS), /^inputs: 4 texts exceed the limit of 3 per request$/);
    invalid(() => validateClassify(req("cls", ["\t"]), MODELS, LIMITS), /^inputs\[0\]: empty text$/);
    invalid(() => validateClassify(req("cls", ["ok", "z".repeat(20)]), MODELS, LIMITS), /^inputs\[1\]: 20 characters exceed the limit of 10/);
  });

  test("model: NotFound and task mismatch", () => {
    assert.throws(() => validateClassify(req("zz", ["a"]), MODELS, LIMITS), ModelNotFoundError);
    invalid(() => validateClassify(req("rr", ["a"]), MODELS, LIMITS), /^model 'rr' is a rerank model, not a classification model; call Rerank$/);
  });
});
