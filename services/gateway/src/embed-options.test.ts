import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { CatalogModel } from "@shoal/common";
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { type EmbedOptionsSchema, EmbedRequestSchema, TokenizeRequestSchema, VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { EmbedOutputSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { vectorsToBytes } from "@shoal/common";
import { validateEmbed, validateTokenize, type RequestLimits } from "./embed-request.ts";
import { embeddingsOf } from "./embed-results.ts";
import { InvalidRequestError, JobFailedError, ModelNotFoundError } from "./errors.ts";

const fake = (id: string, spec: Record<string, unknown>): CatalogModel =>
  ({ id, pool: "p", spec: { maxSequenceLength: 128, ...spec }, batching: {} }) as unknown as CatalogModel;
const MODELS = new Map<string, CatalogModel>([
  ["emb", fake("emb", { task: "embed", dimensions: 8, normalize: true, matryoshka: false })],
  ["mrl", fake("mrl", { task: "embed", dimensions: 8, normalize: true, matryoshka: true })],
  ["rr", fake("rr", { task: "rerank", dimensions: 1 })],
]);
const LIMITS: RequestLimits = { maxInputsPerRequest: 3, maxInputChars: 10 };

function invalid(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => err instanceof InvalidRequestError && message.test(err.message));
}
const embed = (model: string, options: MessageInitShape<typeof EmbedOptionsSchema>) =>
  validateEmbed(create(EmbedRequestSchema, { model, inputs: ["a"], options }), MODELS, LIMITS);

describe("EmbedOptions at the gateway", () => {
  test("dimensions: the full size always; fewer only for Matryoshka models; 0 and more than the model are out of range", () => {
    assert.equal(embed("emb", { dimensions: 8 }).id, "emb");
    assert.equal(embed("mrl", { dimensions: 3 }).id, "mrl");
    invalid(
      () => embed("emb", { dimensions: 4 }),
      /^options\.dimensions: model 'emb' was not trained to be truncated \(not Matryoshka\); only its full 8 dimensions are served$/,
    );
    invalid(() => embed("mrl", { dimensions: 0 }), /^options\.dimensions: 0 is out of range; model 'mrl' gives 1\.\.8 dimensions$/);
    invalid(() => embed("mrl", { dimensions: 9 }), /out of range/);
  });

  test("enum values: unknown ones and repeated or UNSPECIFIED embedding types are refused", () => {
    assert.equal(
      embed("emb", { inputType: InputType.CLUSTERING, truncation: Truncation.START, embeddingTypes: [EmbeddingType.INT8, EmbeddingType.FLOAT] }).id,
      "emb",
    );
    invalid(() => embed("emb", { inputType: 99 as InputType }), /^options\.input_type: unknown value 99$/);
    invalid(() => embed("emb", { truncation: 7 as Truncation }), /^options\.truncation: unknown value 7$/);
    invalid(() => embed("emb", { embeddingTypes: [EmbeddingType.INT8, EmbeddingType.INT8] }), /^options\.embedding_types\[1\]: INT8 is listed twice$/);
    invalid(() => embed("emb", { embeddingTypes: [EmbeddingType.UNSPECIFIED] }), /^options\.embedding_types\[0\]: unknown value 0$/);
  });

  test("Tokenize takes a model of any task; unknown model NotFound; texts checked as Embed checks them", () => {
    const tokenize = (model: string, inputs: string[]) => validateTokenize(create(TokenizeRequestSchema, { model, inputs }), MODELS, LIMITS);
    assert.equal(tokenize("rr", ["a"]).id, "rr");
    assert.throws(() => tokenize("nope", ["a"]), ModelNotFoundError);
    invalid(() => tokenize("emb", []), /^inputs: at least one text is required$/);
    invalid(() => tokenize("", ["a"]), /^model: required$/);
  });
});

describe("Embeddings from a worker's EmbedOutput", () => {
  const out = (o: Record<string, unknown>) => create(EmbedOutputSchema, { dimensions: 2, tokenCounts: [3, 4], truncated: [1], ...o });

  test("float values and each quantised type's row per input", () => {
    const { embeddings, promptTokens } = embeddingsOf(
      out({ vectors: vectorsToBytes(new Float32Array([1, 0, 0, -1])), int8: new Uint8Array([127, 0, 0, 129]), ubinary: new Uint8Array([0x80, 0]) }),
      2,
      VectorEncoding.FLOAT,
    );
    assert.equal(promptTokens, 7);
    assert.deepEqual(embeddings[1]!.values, [0, -1]);
    assert.deepEqual(Array.from(embeddings[1]!.int8 as Uint8Array), [0, 129]);
    assert.deepEqual(Array.from(embeddings[0]!.ubinary as Uint8Array), [0x80]);
    assert.equal(embeddings[0]!.binary, undefined);
    assert.equal(embeddings[1]!.truncated, true);
  });

  test("no float bytes when FLOAT was left out; any part of the wrong size is Internal", () => {
    const { embeddings } = embeddingsOf(out({ uint8: new Uint8Array([1, 2, 3, 4]) }), 2, VectorEncoding.FLOAT);
    assert.equal(embeddings[0]!.values, undefined);
    assert.throws(() => embeddingsOf(out({ uint8: new Uint8Array([1, 2, 3]) }), 2, VectorEncoding.FLOAT), JobFailedError);
    assert.throws(() => embeddingsOf(out({}), 2, VectorEncoding.FLOAT), JobFailedError);
  });
});
