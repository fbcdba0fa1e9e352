import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { EmbeddingType, InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { cohereMessage, cohereStatus, parseCohereEmbed, parseCohereRerank } from "./cohere-routes.ts";
import { RouteRequestError } from "./http-call.ts";

function refusal(fn: () => unknown): RouteRequestError {
  try {
    fn();
  } catch (err) {
    assert.ok(RouteRequestError.is(err as ConnectError));
    return err as RouteRequestError;
  }
  assert.fail("expected a refusal");
}

test("v2 embed: Cohere's names become Embed options; truncate defaults to END; float when no types", () => {
  const p = parseCohereEmbed({ model: "m", texts: ["a", "b"], input_type: "search_query", embedding_types: ["int8", "ubinary"], output_dimension: 64 }, 2);
  assert.deepEqual(p, {
    model: "m",
    texts: ["a", "b"],
    inputType: InputType.SEARCH_QUERY,
    types: [EmbeddingType.INT8, EmbeddingType.UBINARY],
    floatsOnly: false,
    truncation: Truncation.END,
    dimensions: 64,
    maxTokens: undefined,
  });
  const plain = parseCohereEmbed({ model: "m", texts: ["a"], truncate: "NONE" }, 2);
  assert.deepEqual(plain.types, [EmbeddingType.FLOAT]);
  assert.equal(plain.inputType, InputType.UNSPECIFIED, "input_type is optional (no prompt)");
  assert.equal(plain.truncation, Truncation.NONE);
  assert.equal(parseCohereEmbed({ texts: ["a"] }, 1).floatsOnly, true, "v1 without types: embeddings_floats");
  assert.equal(parseCohereEmbed({ texts: ["a"] }, 1).model, "", "v1 model is optional");
});

test("embed refusals name the field: model (v2), texts, input_type, embedding_types, truncate, images", () => {
  assert.equal(refusal(() => parseCohereEmbed({ texts: ["a"] }, 2)).param, "model");
  assert.equal(refusal(() => parseCohereEmbed({ model: "m", texts: "a" }, 2)).param, "texts");
  assert.equal(refusal(() => parseCohereEmbed({ model: "m", texts: ["a"], input_type: "image" }, 2)).param, "input_type");
  assert.match(refusal(() => parseCohereEmbed({ model: "m", texts: ["a"], embedding_types: ["float", "half"] }, 2)).message, /embedding_types\[1\]/);
  assert.equal(refusal(() => parseCohereEmbed({ model: "m", texts: ["a"], truncate: "MIDDLE" }, 2)).param, "truncate");
  assert.equal(refusal(() => parseCohereEmbed({ model: "m", images: ["data:"] }, 2)).param, "images");
  assert.equal(refusal(() => parseCohereEmbed([], 2)).kind, "invalid");
});

test("rerank: v1 takes { text } objects and return_documents; v2 strings and max_tokens_per_doc", () => {
  const v1 = parseCohereRerank({ query: "q", documents: ["a", { text: "b", id: 7 }], return_documents: true, top_n: 1 }, 1);
  assert.deepEqual(v1.documents, ["a", "b"]);
  assert.deepEqual(v1.returned, [{ text: "a" }, { text: "b", id: 7 }]);
  assert.equal(v1.topN, 1);
  const v2 = parseCohereRerank({ model: "r", query: "q", documents: ["a"], max_tokens_per_doc: 512, return_documents: true }, 2);
  assert.equal(v2.maxTokensPerDoc, 512);
  assert.equal(v2.returned, undefined, "v2 never returns documents");
  assert.equal(refusal(() => parseCohereRerank({ model: "r", query: "q", documents: [{ text: "b" }] }, 2)).param, "documents");
  assert.equal(refusal(() => parseCohereRerank({ model: "r", query: "q", documents: ["a"], top_n: 0 }, 2)).param, "top_n");
  assert.equal(refusal(() => parseCohereRerank({ query: "q", documents: ["a"], rank_fields: ["title"] }, 1)).param, "rank_fields");
});

test("statuses: shape 422, JSON 400, Shoal validation 400, 401, 404, 429, 503, size 413", () => {
  assert.equal(cohereStatus(new RouteRequestError("x", "invalid")), 422);
  assert.equal(cohereStatus(new RouteRequestError("x", "malformed")), 400);
  assert.equal(cohereStatus(new RouteRequestError("x", "too_large")), 413);
  assert.equal(cohereStatus(new ConnectError("x", Code.InvalidArgument)), 400);
  assert.equal(cohereStatus(new ConnectError("x", Code.Unauthenticated)), 401);
  assert.equal(cohereStatus(new ConnectError("x", Code.NotFound)), 404);
  assert.equal(cohereStatus(new ConnectError("x", Code.ResourceExhausted)), 429);
  assert.equal(cohereStatus(new ConnectError("x", Code.Unavailable)), 503);
  assert.equal(cohereStatus(new ConnectError("x", Code.Internal)), 500);
});

test("messages name Cohere's fields, not EmbedRequest's", () => {
  assert.equal(cohereMessage("inputs[2]: empty text"), "texts[2]: empty text");
  assert.equal(cohereMessage("options.dimensions: 1000 is out of range"), "output_dimension: 1000 is out of range");
  assert.equal(cohereMessage("documents[0]: empty text"), "documents[0]: empty text");
});
