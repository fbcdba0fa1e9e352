import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import type { Client } from "@connectrpc/connect";
import { EmbeddingType, InputType } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { keyedInference, maxAbsDiff } from "./harness/clients.ts";
import { type Scrape, scrape, total } from "./harness/prometheus.ts";
import { E5_PROMPTS, tinyVariant } from "./harness/tiny-variant.ts";

/**
 * The tiny generated encoder with E5's prompts (so that input types change the vector), declared
 * Matryoshka-trained (so that dimensions can be cut), and the tiny cross-encoder; random weights:
 * the mapping is what is tested.
 */
const EMBED = "shoal-tiny-prompted";
const RERANK = "shoal-tiny-rerank";
const KEY = "sk-peer-0a1b2c3d4e5f6789";
const TEXTS = ["The harbour was full of small fishing boats.", "A shoal of silver fish turned at once.", "Quarterly revenue grew by twelve percent."];
const QUERY = "how do fish swim together";
const MAX_REQUEST_BYTES = 64 * 1024;
/** Far past the tiny models' max sequence length, within the per-input character limit. */
const LONG = "fish ".repeat(2_000);
const ORIGIN = "https://app.example";

interface Answer {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers of many shapes, read field by field
  readonly body: any;
}

describe("peer APIs (Cohere, TEI) on a real cluster: same values as Shoal's own RPCs", () => {
  let cluster: TestCluster;
  let base: string;
  let shoal: Client<typeof InferenceService>;
  before(async () => {
    cluster = await startCluster({
      presets: ["tiny-rerank"],
      modelDirs: [await tinyVariant(EMBED, { prompts: E5_PROMPTS, matryoshka: true })],
      gatewayEnv: { SHOAL_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES), SHOAL_API_KEYS: `peer=${KEY}`, SHOAL_CORS_ORIGINS: ORIGIN },
    });
    base = cluster.urls[0]!;
    shoal = keyedInference(base, KEY);
  });
  after(async () => {
    await cluster?.stop();
  });

  async function post(path: string, body: unknown, key: string | null = KEY): Promise<Answer> {
    const res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }

  test("Cohere /v2/embed: float equals Embed; int8, uint8, binary, ubinary equal Embed's bytes; meta bills input tokens", async () => {
    const res = await post("/v2/embed", {
      model: EMBED,
      texts: TEXTS,
      input_type: "search_document",
      embedding_types: ["float", "int8", "uint8", "binary", "ubinary"],
    });
    assert.equal(res.status, 200);
    const ref = await shoal.embed({
      model: EMBED,
      inputs: TEXTS,
      options: {
        inputType: InputType.SEARCH_DOCUMENT,
        embeddingTypes: [EmbeddingType.FLOAT, EmbeddingType.INT8, EmbeddingType.UINT8, EmbeddingType.BINARY, EmbeddingType.UBINARY],
      },
    });
    assert.deepEqual(res.body.texts, TEXTS);
    assert.equal(res.body.meta.api_version.version, "2");
    assert.equal(res.body.meta.billed_units.input_tokens, ref.usage?.promptTokens);
    assert.match(res.body.id, /^[0-9a-f-]{36}$/);
    for (const [i, e] of ref.embeddings.entries()) {
      assert.ok(maxAbsDiff(res.body.embeddings.float[i], e.values) < 1e-6, `float ${i}`);
      assert.deepEqual(res.body.embeddings.int8[i], Array.from(new Int8Array(e.int8.buffer, e.int8.byteOffset, e.int8.byteLength)));
      assert.deepEqual(res.body.embeddings.uint8[i], Array.from(e.uint8));
      assert.deepEqual(res.body.embeddings.binary[i], Array.from(new Int8Array(e.binary.buffer, e.binary.byteOffset, e.binary.byteLength)));
      assert.deepEqual(res.body.embeddings.ubinary[i], Array.from(e.ubinary));
    }
    assert.ok(
      res.body.embeddings.int8[0].some((v: number) => v < 0),
      "signed bytes come back negative",
    );
  });

  test("input types: Cohere's and OpenAI's input_type and TEI's prompt_name put the model's prompt in front, as Embed does", async () => {
    const text = TEXTS[1]!;
    const [cohereQ, openaiQ, teiDoc, literalQ, literalDoc, plain] = await Promise.all([
      post("/v2/embed", { model: EMBED, texts: [text], input_type: "search_query" }),
      post("/v1/embeddings", { model: EMBED, input: text, input_type: "search_query", encoding_format: "float" }),
      post("/embed", { inputs: text, prompt_name: "passage" }),
      shoal.embed({ model: EMBED, inputs: [`query: ${text}`] }),
      shoal.embed({ model: EMBED, inputs: [`passage: ${text}`] }),
      shoal.embed({ model: EMBED, inputs: [text] }),
    ]);
    const v = (r: typeof plain): number[] => r.embeddings[0]!.values;
    assert.ok(maxAbsDiff(cohereQ.body.embeddings.float[0], v(literalQ)) < 1e-6);
    assert.ok(maxAbsDiff(openaiQ.body.data[0].embedding, v(literalQ)) < 1e-6);
    assert.ok(maxAbsDiff(teiDoc.body[0], v(literalDoc)) < 1e-6);
    assert.ok(maxAbsDiff(v(literalQ), v(plain)) > 1e-3, "the prompt changes the vector");
  });

  test("dimensions: Cohere's output_dimension and TEI's dimensions cut and renormalise as Embed does; out of range is refused", async () => {
    const [cohere, tei, ref, cohereBad, teiBad] = await Promise.all([
      post("/v2/embed", { model: EMBED, texts: TEXTS, output_dimension: 16, embedding_types: ["float", "int8"] }),
      post("/embed", { inputs: TEXTS, dimensions: 16 }),
      shoal.embed({ model: EMBED, inputs: TEXTS, options: { dimensions: 16, embeddingTypes: [EmbeddingType.FLOAT, EmbeddingType.INT8] } }),
      post("/v2/embed", { model: EMBED, texts: TEXTS, output_dimension: 1_000 }),
      post("/embed", { inputs: TEXTS, dimensions: 1_000 }),
    ]);
    for (const [i, e] of ref.embeddings.entries()) {
      assert.equal(cohere.body.embeddings.float[i].length, 16);
      assert.ok(maxAbsDiff(cohere.body.embeddings.float[i], e.values) < 1e-6);
      assert.deepEqual(cohere.body.embeddings.int8[i], Array.from(new Int8Array(e.int8.buffer, e.int8.byteOffset, e.int8.byteLength)));
      assert.ok(maxAbsDiff(tei.body[i], e.values) < 1e-6);
    }
    assert.equal(cohereBad.status, 400);
    assert.match(cohereBad.body.message, /^output_dimension: 1000 is out of range/);
    assert.deepEqual([teiBad.status, teiBad.body.error_type], [422, "Validation"]);
    assert.match(teiBad.body.error, /^dimensions: 1000 is out of range/);
  });

  test("Cohere /v1/embed: no embedding_types gives embeddings_floats; with them embeddings_by_type", async () => {
    const [plain, typed, ref] = await Promise.all([
      post("/v1/embed", { model: EMBED, texts: TEXTS }),
      post("/v1/embed", { texts: [TEXTS[0]], embedding_types: ["int8"] }),
      shoal.embed({ model: EMBED, inputs: TEXTS, options: { embeddingTypes: [EmbeddingType.FLOAT, EmbeddingType.INT8] } }),
    ]);
    assert.equal(plain.body.response_type, "embeddings_floats");
    for (const [i, e] of ref.embeddings.entries()) assert.ok(maxAbsDiff(plain.body.embeddings[i], e.values) < 1e-6);
    assert.equal(typed.body.response_type, "embeddings_by_type", "v1 without a model: the catalog's embedding model");
    const i8 = ref.embeddings[0]!.int8;
    assert.deepEqual(typed.body.embeddings.int8[0], Array.from(new Int8Array(i8.buffer, i8.byteOffset, i8.byteLength)));
  });

  test("Cohere /v2/rerank: order and relevance scores equal Rerank's (sigmoid, in [0, 1]); top_n; one search unit", async () => {
    const [res, ref] = await Promise.all([
      post("/v2/rerank", { model: RERANK, query: QUERY, documents: TEXTS, top_n: 2 }),
      shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS }),
    ]);
    assert.equal(res.status, 200);
    assert.equal(res.body.results.length, 2);
    for (const [i, r] of res.body.results.entries()) {
      assert.equal(r.index, ref.results[i]!.index);
      assert.ok(Math.abs(r.relevance_score - ref.results[i]!.score) < 1e-6);
      assert.ok(r.relevance_score >= 0 && r.relevance_score <= 1);
      assert.equal(r.document, undefined);
    }
    assert.deepEqual(res.body.meta, { api_version: { version: "2" }, billed_units: { search_units: 1 } });
  });

  test("Cohere /v1/rerank: { text } documents, return_documents gives each document back", async () => {
    const [res, ref] = await Promise.all([
      post("/v1/rerank", { model: RERANK, query: QUERY, documents: [{ text: TEXTS[0] }, TEXTS[1], { text: TEXTS[2] }], return_documents: true }),
      shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS }),
    ]);
    assert.deepEqual(
      res.body.results.map((r: { index: number; document: { text: string } }) => [r.index, r.document.text]),
      ref.results.map((r) => [r.index, TEXTS[r.index]]),
    );
  });

  test("Cohere errors: { message } with 401, 404, 422, 400 (NONE never truncates), 413", async () => {
    const cases: [string, unknown, number, RegExp, (string | null)?][] = [
      ["/v2/embed", { model: EMBED, texts: TEXTS }, 401, /key/i, null],
      ["/v2/embed", { model: "no-such-model", texts: TEXTS }, 404, /no-such-model/],
      ["/v2/embed", { texts: TEXTS }, 422, /^model: required/],
      ["/v2/embed", { model: EMBED, texts: "not a list" }, 422, /^texts/],
      ["/v2/embed", { model: EMBED, texts: TEXTS, embedding_types: ["float16"] }, 422, /embedding_types\[0\]/],
      ["/v2/embed", { model: EMBED, texts: [LONG], truncate: "NONE" }, 400, /tokens/],
      ["/v2/embed", { model: RERANK, texts: TEXTS }, 400, /rerank model/],
      ["/v2/embed", "{not json", 400, /not valid JSON/],
      ["/v2/rerank", { model: RERANK, query: QUERY, documents: [{ text: "objects are v1 only" }] }, 422, /documents\[0\]/],
      ["/v2/rerank", { model: RERANK, query: QUERY, documents: TEXTS, max_tokens_per_doc: 4 }, 422, /max_tokens_per_doc/],
      ["/v2/rerank", { model: RERANK, query: QUERY, documents: ["x".repeat(MAX_REQUEST_BYTES)] }, 413, /exceeds the limit/],
    ];
    for (const [path, body, status, message, key] of cases) {
      const res = await post(path, body, key === undefined ? KEY : key);
      assert.equal(res.status, status, `${path} ${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.message, message);
    }
  });

  test("Cohere truncate END embeds a long text (the same vector as Embed with END)", async () => {
    const [res, ref] = await Promise.all([
      post("/v2/embed", { model: EMBED, texts: [LONG] }),
      shoal.embed({ model: EMBED, inputs: [LONG], options: { truncate: true } }),
    ]);
    assert.equal(res.status, 200);
    assert.ok(maxAbsDiff(res.body.embeddings.float[0], ref.embeddings[0]!.values) < 1e-6);
  });

  test("TEI /embed: [[floats]] equal Embed; normalize false and prompt_name map to Embed's options", async () => {
    const [one, root, raw, query, ref, refRaw, refQuery] = await Promise.all([
      post("/embed", { inputs: TEXTS[0] }),
      post("/embed", { inputs: TEXTS }),
      post("/embed", { inputs: TEXTS, normalize: false }),
      post("/embed", { inputs: [TEXTS[1]], prompt_name: "query" }),
      shoal.embed({ model: EMBED, inputs: TEXTS }),
      shoal.embed({ model: EMBED, inputs: TEXTS, options: { normalize: false } }),
      shoal.embed({ model: EMBED, inputs: [TEXTS[1]!], options: { inputType: InputType.QUERY } }),
    ]);
    assert.equal(one.body.length, 1);
    assert.ok(maxAbsDiff(one.body[0], ref.embeddings[0]!.values) < 1e-6);
    for (const [i, e] of ref.embeddings.entries()) assert.ok(maxAbsDiff(root.body[i], e.values) < 1e-6);
    for (const [i, e] of refRaw.embeddings.entries()) assert.ok(maxAbsDiff(raw.body[i], e.values) < 1e-6);
    assert.ok(maxAbsDiff(query.body[0], refQuery.embeddings[0]!.values) < 1e-6);
  });

  test("TEI /rerank: sorted like Rerank; raw_scores are the logits; return_text", async () => {
    const [res, raw, ref] = await Promise.all([
      post("/rerank", { query: QUERY, texts: TEXTS, return_text: true }),
      post("/rerank", { query: QUERY, texts: TEXTS, raw_scores: true }),
      shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS }),
    ]);
    assert.equal(res.status, 200);
    for (const [i, r] of ref.results.entries()) {
      assert.equal(res.body[i].index, r.index);
      assert.ok(Math.abs(res.body[i].score - r.score) < 1e-6);
      assert.equal(res.body[i].text, TEXTS[r.index]);
      assert.ok(Math.abs(1 / (1 + Math.exp(-raw.body[i].score)) - r.score) < 1e-6, "sigmoid(raw) = score");
    }
  });

  test("TEI /tokenize: ids equal Tokenize's; text is the input's slice, offsets in UTF-8 bytes; add_special_tokens false drops [CLS]/[SEP]", async () => {
    const text = "Fish 🐟 swim";
    const [res, bare, ref] = await Promise.all([
      post("/tokenize", { inputs: text }),
      post("/tokenize", { inputs: [text], add_special_tokens: false }),
      shoal.tokenize({ model: EMBED, inputs: [text] }),
    ]);
    const t = ref.tokenized[0]!;
    assert.deepEqual(
      res.body[0].map((x: { id: number }) => x.id),
      t.ids,
    );
    assert.deepEqual(
      bare.body[0].map((x: { id: number }) => x.id),
      t.ids.filter((_, i) => !t.special[i]),
    );
    const bytes = Buffer.from(text);
    for (const tok of bare.body[0]) assert.equal(bytes.subarray(tok.start, tok.stop).toString(), tok.text);
    assert.equal(res.body[0][0].special, true);
    assert.equal(res.body[0][0].start, null);
  });

  test("TEI /info names the model and its limits; /health is 200 without a key", async () => {
    const info = (await (await fetch(`${base}/info`)).json()) as { model_id: string; max_input_length: number; shoal_rerank_model_id: string };
    assert.equal(info.model_id, EMBED);
    assert.ok(info.max_input_length > 0);
    assert.equal(info.shoal_rerank_model_id, RERANK);
    assert.equal((await fetch(`${base}/health`)).status, 200);
  });

  test("TEI errors: { error, error_type } with 401, 422 (no silent truncation), 400 Empty, 413, 422 for a bad field", async () => {
    const cases: [string, unknown, number, string, (string | null)?][] = [
      ["/embed", { inputs: TEXTS }, 401, "Unauthorized", null],
      ["/embed", { inputs: [LONG] }, 422, "Validation"],
      ["/embed", { inputs: [] }, 400, "Empty"],
      ["/embed", { inputs: ["x".repeat(MAX_REQUEST_BYTES)] }, 413, "Validation"],
      ["/embed", { inputs: TEXTS, truncation_direction: "Up", truncate: true }, 422, "Validation"],
      ["/rerank", { query: QUERY, texts: [LONG] }, 422, "Validation"],
      ["/tokenize", { inputs: 3 }, 422, "Validation"],
    ];
    for (const [path, body, status, type, key] of cases) {
      const res = await post(path, body, key === undefined ? KEY : key);
      assert.equal(res.status, status, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error_type, type);
      assert.equal(typeof res.body.error, "string");
    }
    const cut = await post("/embed", { inputs: [LONG], truncate: true, truncation_direction: "Left" });
    const ref = await shoal.embed({ model: EMBED, inputs: [LONG], options: { truncation: 2 } });
    assert.ok(maxAbsDiff(cut.body[0], ref.embeddings[0]!.values) < 1e-6, "Left = START");
  });

  test("/metrics counts each route's calls under its own method label, with the tenant of the key", async () => {
    const before = await scrape(`${base}/metrics`, KEY);
    await post("/v2/embed", { model: EMBED, texts: ["counted"] });
    await post("/v2/rerank", { model: RERANK, query: QUERY, documents: ["counted"] });
    await post("/embed", { inputs: "counted" });
    await post("/v2/embed", { model: "no-such-model", texts: ["counted"] });
    const delta = (after: Scrape, m: Record<string, string>): number =>
      total(after, "shoal_gateway_requests_total", m) - total(before, "shoal_gateway_requests_total", m);
    let after = before;
    // The metrics are recorded when the response has gone; the client may read it first.
    for (let i = 0; i < 50 && delta(after, { tenant: "peer" }) < 4; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await scrape(`${base}/metrics`, KEY);
    }
    assert.equal(delta(after, { method: "Cohere.EmbedV2", model: EMBED, code: "ok", tenant: "peer" }), 1);
    assert.equal(delta(after, { method: "Cohere.EmbedV2", code: "NotFound" }), 1);
    assert.equal(delta(after, { method: "Cohere.RerankV2", model: RERANK, code: "ok" }), 1);
    assert.equal(delta(after, { method: "TEI.Embed", model: EMBED, code: "ok" }), 1);
  });

  test("HTTP/2 (h2c) calls and browser preflights reach the routes as they reach the RPCs", async () => {
    const session = http2.connect(base);
    try {
      const answer = await new Promise<{ status: number; body: string }>((ok, fail) => {
        const stream = session.request({
          ":method": "POST",
          ":path": "/v2/rerank",
          "content-type": "application/json",
          authorization: `Bearer ${KEY}`,
        });
        let status = 0;
        let body = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", (d: Buffer) => (body += d.toString()));
        stream.once("end", () => ok({ status, body }));
        stream.once("error", fail);
        stream.end(JSON.stringify({ model: RERANK, query: QUERY, documents: TEXTS }));
      });
      const ref = await shoal.rerank({ model: RERANK, query: QUERY, documents: TEXTS });
      assert.equal(answer.status, 200);
      assert.deepEqual(
        (JSON.parse(answer.body) as { results: { index: number }[] }).results.map((r) => r.index),
        ref.results.map((r) => r.index),
      );
    } finally {
      session.close();
    }
    for (const path of ["/v2/embed", "/embed"]) {
      const pre = await fetch(`${base}${path}`, {
        method: "OPTIONS",
        headers: { origin: ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
      });
      assert.ok(pre.status === 204 || pre.status === 200, `${path} preflight ${pre.status}`);
      assert.equal(pre.headers.get("access-control-allow-origin"), ORIGIN);
      assert.match(pre.headers.get("access-control-allow-headers") ?? "", /authorization/i);
    }
  });
});
