import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff } from "./harness/clients.ts";
import { histogramCount, scrape, total, type Scrape } from "./harness/prometheus.ts";

const TEXTS = ["The harbour was full of small fishing boats.", "A shoal of silver fish turned at once.", "Quarterly revenue grew by twelve percent."];
const MAX_REQUEST_BYTES = 256 * 1024;

/** Little-endian float32 bytes in base64 (OpenAI's encoding_format=base64) as numbers. */
function fromBase64(b64: string): number[] {
  const bytes = Buffer.from(b64, "base64");
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
}

describe("OpenAI-compatible POST /v1/embeddings: the official openai SDK against the real stack", () => {
  let cluster: TestCluster;
  let model: string;
  let base: string;
  let openai: OpenAI;
  before(async () => {
    cluster = await startCluster({ gatewayEnv: { SHOAL_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES) } });
    model = cluster.modelIds[0]!;
    base = cluster.urls[0]!;
    // maxRetries 0: error cases must surface at once, not after the SDK's backoff.
    openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "not-checked", maxRetries: 0 });
  });
  after(async () => {
    await cluster?.stop();
  });

  async function viaConnect(texts: string[]): Promise<{ vectors: number[][]; promptTokens: number }> {
    const res = await clientsFor(base, "connect").inference.embed({ model, inputs: texts });
    return { vectors: res.embeddings.map((e) => e.values), promptTokens: res.usage?.promptTokens ?? -1 };
  }

  test("encoding_format float: same vectors as Embed (within 1e-6), same usage, OpenAI's response shape", async () => {
    const res = await openai.embeddings.create({ model, input: TEXTS, encoding_format: "float", user: "ignored" });
    const expected = await viaConnect(TEXTS);
    assert.equal(res.object, "list");
    assert.equal(res.model, model);
    assert.equal(res.data.length, TEXTS.length);
    for (const [i, d] of res.data.entries()) {
      assert.equal(d.object, "embedding");
      assert.equal(d.index, i);
      assert.ok(maxAbsDiff(d.embedding, expected.vectors[i]!) < 1e-6, `vector ${i}`);
    }
    assert.equal(res.usage.prompt_tokens, expected.promptTokens);
    assert.equal(res.usage.total_tokens, expected.promptTokens);
  });

  test("encoding_format base64: little-endian float32, equal to Embed's vectors", async () => {
    const res = await openai.embeddings.create({ model, input: TEXTS, encoding_format: "base64" });
    const expected = await viaConnect(TEXTS);
    for (const [i, d] of res.data.entries()) {
      assert.equal(typeof d.embedding, "string");
      assert.ok(maxAbsDiff(fromBase64(d.embedding as unknown as string), expected.vectors[i]!) < 1e-6, `vector ${i}`);
    }
  });

  test("no encoding_format: the SDK asks for base64 itself and decodes it; a single string input works", async () => {
    const res = await openai.embeddings.create({ model, input: TEXTS[1]! });
    const expected = await viaConnect([TEXTS[1]!]);
    assert.equal(res.data.length, 1);
    assert.ok(Array.isArray(res.data[0]!.embedding));
    assert.ok(maxAbsDiff(res.data[0]!.embedding, expected.vectors[0]!) < 1e-6);
  });

  test("dimensions equal to the model's are accepted; any other value is a 400 naming the parameter", async () => {
    const dims = (await clientsFor(base, "connect").models.getModel({ id: model })).model!.dimensions;
    const ok = await openai.embeddings.create({ model, input: "hello", dimensions: dims, encoding_format: "float" });
    assert.equal(ok.data[0]!.embedding.length, dims);
    await assert.rejects(openai.embeddings.create({ model, input: "hello", dimensions: dims - 1 }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.param, "dimensions");
      assert.match(err.message, new RegExp(`not Matryoshka.*full ${dims} dimensions`));
      return true;
    });
  });

  test("unknown model: 404 in OpenAI's error shape", async () => {
    await assert.rejects(openai.embeddings.create({ model: "no-such-model", input: "hi" }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.status, 404);
      assert.equal(err.type, "invalid_request_error");
      assert.equal(err.code, "model_not_found");
      assert.equal(err.param, "model");
      assert.match(err.message, /no-such-model/);
      return true;
    });
    const raw = await fetch(`${base}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "no-such-model", input: "hi" }),
    });
    assert.equal(raw.status, 404);
    assert.match(raw.headers.get("content-type") ?? "", /application\/json/);
    const body = (await raw.json()) as { error: Record<string, unknown> };
    assert.deepEqual(Object.keys(body), ["error"]);
    assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  });

  test("empty input (an empty list, an empty string) and token-id input: 400 naming `input`", async () => {
    for (const input of [[], "", ["fine", "  "]] as Array<string | string[]>) {
      await assert.rejects(openai.embeddings.create({ model, input }), (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${JSON.stringify(input)}: ${String(err)}`);
        assert.equal(err.param, "input");
        assert.equal(err.type, "invalid_request_error");
        assert.match(err.message, /^400 input/);
        return true;
      });
    }
    await assert.rejects(openai.embeddings.create({ model, input: [101, 2023, 102] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.match(err.message, /token-id arrays are not supported/);
      return true;
    });
  });

  test("/metrics counts and times the endpoint like an RPC: method OpenAI.Embeddings, model, lane, Connect code", async () => {
    const before = await scrape(`${base}/metrics`);
    await openai.embeddings.create({ model, input: ["counted"], encoding_format: "float" });
    await openai.embeddings.create({ model, input: "counted too" });
    await assert.rejects(openai.embeddings.create({ model: "no-such-model", input: "hi" }));
    await assert.rejects(openai.embeddings.create({ model, input: [] }));
    // The metrics are recorded when the response has gone; the client may read it first.
    let after: Scrape = before;
    const delta = (m: Record<string, string>): number =>
      total(after, "shoal_gateway_requests_total", { method: "OpenAI.Embeddings", ...m }) -
      total(before, "shoal_gateway_requests_total", { method: "OpenAI.Embeddings", ...m });
    for (let i = 0; i < 50 && delta({}) < 4; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await scrape(`${base}/metrics`);
    }
    assert.equal(delta({ model, lane: "interactive", code: "ok" }), 2);
    assert.equal(delta({ model: "unknown", code: "NotFound" }), 1);
    assert.equal(delta({ model, code: "InvalidArgument" }), 1);
    const observed = (m: Record<string, string>): number =>
      histogramCount(after, "shoal_gateway_request_duration_seconds", m) - histogramCount(before, "shoal_gateway_request_duration_seconds", m);
    assert.equal(observed({ method: "OpenAI.Embeddings", model, code: "ok" }), 2);
    assert.equal(delta({}), 4, "each call counted once");
  });

  test("plain HTTP: timing headers, 413 past the body limit, 415 for a non-JSON body, 405 for GET", async () => {
    const post = (body: string, type = "application/json"): Promise<Response> =>
      fetch(`${base}/v1/embeddings`, { method: "POST", headers: { "content-type": type }, body });
    const ok = await post(JSON.stringify({ model, input: "timing" }));
    assert.equal(ok.status, 200);
    assert.ok(Number(ok.headers.get("shoal-total-ms")) > 0);
    assert.ok(ok.headers.get("shoal-worker"));
    const big = await post(JSON.stringify({ model, input: "x".repeat(MAX_REQUEST_BYTES) }));
    assert.equal(big.status, 413);
    assert.equal(((await big.json()) as { error: { code: string } }).error.code, "request_too_large");
    assert.equal((await post("input=hi", "application/x-www-form-urlencoded")).status, 415);
    assert.equal((await post("{not json")).status, 400);
    const get = await fetch(`${base}/v1/embeddings`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
  });
});
