import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { InputType, Truncation } from "@shoal/gen/shoal/v1/common_pb.ts";
import { RouteRequestError } from "./http-call.ts";
import { logitOf, parseTeiEmbed, parseTeiRerank, teiErrorFrom, teiTokens } from "./tei-routes.ts";

test("/embed: a lone string or a list; normalize defaults to true; truncate false is NONE, Right END, Left START", () => {
  assert.deepEqual(parseTeiEmbed({ inputs: "a" }), {
    inputs: ["a"],
    normalize: true,
    truncation: Truncation.NONE,
    inputType: InputType.UNSPECIFIED,
    dimensions: undefined,
  });
  assert.equal(parseTeiEmbed({ inputs: ["a"], truncate: true }).truncation, Truncation.END);
  assert.equal(parseTeiEmbed({ inputs: ["a"], truncate: true, truncation_direction: "left" }).truncation, Truncation.START);
  assert.equal(parseTeiEmbed({ inputs: ["a"], truncation_direction: "Left" }).truncation, Truncation.NONE, "direction alone cuts nothing");
  assert.equal(parseTeiEmbed({ inputs: ["a"], prompt_name: "passage" }).inputType, InputType.DOCUMENT);
  assert.equal(parseTeiEmbed({ inputs: ["a"], normalize: false }).normalize, false);
  assert.throws(() => parseTeiEmbed({ inputs: ["a"], prompt_name: "poem" }), /prompt_name/);
  assert.throws(() => parseTeiEmbed({ inputs: [1] }), /inputs/);
});

test("/rerank: Left truncation is refused (Shoal's Rerank cuts from the end, longest_first)", () => {
  assert.deepEqual(parseTeiRerank({ query: "q", texts: ["a"], raw_scores: true }), {
    query: "q",
    texts: ["a"],
    truncate: false,
    rawScores: true,
    returnText: false,
  });
  assert.throws(() => parseTeiRerank({ query: "q", texts: ["a"], truncate: true, truncation_direction: "Left" }), /only Right/);
});

test("raw_scores: the logit back from the sigmoid, saturating instead of infinite", () => {
  for (const x of [-8, -1.5, 0, 0.25, 3, 9]) assert.ok(Math.abs(logitOf(Math.fround(1 / (1 + Math.exp(-x)))) - x) < 1e-3 * Math.max(1, Math.abs(x) ** 3));
  assert.ok(Number.isFinite(logitOf(1)) && logitOf(1) > 16);
  assert.ok(Number.isFinite(logitOf(0)) && logitOf(0) < -16);
});

test("tokens: code-point offsets become UTF-8 byte offsets; special tokens have none and can be dropped", () => {
  const input = "é 🐟x";
  const ids = [101, 1, 2, 3, 102];
  const tokens = ["[CLS]", "é", "🐟", "##x", "[SEP]"];
  const starts = [0, 0, 2, 3, 0];
  const ends = [0, 1, 3, 4, 0];
  const special = [true, false, false, false, true];
  const all = teiTokens(input, ids, tokens, starts, ends, special, true);
  assert.deepEqual(all[0], { id: 101, text: "[CLS]", special: true, start: null, stop: null });
  assert.deepEqual(all.slice(1, 4), [
    { id: 1, text: "é", special: false, start: 0, stop: 2 },
    { id: 2, text: "🐟", special: false, start: 3, stop: 7 },
    { id: 3, text: "x", special: false, start: 7, stop: 8 },
  ]);
  assert.deepEqual(
    teiTokens(input, ids, tokens, starts, ends, special, false).map((t) => t.id),
    [1, 2, 3],
  );
});

test("errors: TEI's statuses and error types", () => {
  assert.deepEqual(teiErrorFrom(new RouteRequestError("x", "too_large")), { status: 413, type: "Validation" });
  assert.deepEqual(teiErrorFrom(new RouteRequestError("x", "invalid")), { status: 422, type: "Validation" });
  assert.deepEqual(teiErrorFrom(new ConnectError("inputs: at least one text is required", Code.InvalidArgument)), { status: 400, type: "Empty" });
  assert.deepEqual(teiErrorFrom(new ConnectError("inputs[0]: 900 tokens exceed 128", Code.InvalidArgument)), { status: 422, type: "Validation" });
  assert.deepEqual(teiErrorFrom(new ConnectError("x", Code.ResourceExhausted)), { status: 429, type: "Overloaded" });
  assert.deepEqual(teiErrorFrom(new ConnectError("x", Code.Unavailable)), { status: 503, type: "Unhealthy" });
  assert.deepEqual(teiErrorFrom(new ConnectError("x", Code.Internal)), { status: 424, type: "Backend" });
});
