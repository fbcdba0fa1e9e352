import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { createLogger, type CatalogModel } from "@shoal/common";
import { EmbedResponseSchema, VectorEncoding, type EmbedRequest } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { hashApiKey } from "./api-keys.ts";
import { mapErrors } from "./map-errors.ts";
import { ApiKeys, principalKey, requireApiKey } from "./auth.ts";
import { ModelNotFoundError } from "./errors.ts";
import { createOpenAiEmbeddings, openAiErrorFrom } from "./openai-embeddings.ts";

const MODEL = { id: "m", pool: "p", spec: { dimensions: 3 } } as unknown as CatalogModel;

describe("POST /v1/embeddings over a stand-in Embed (a test double of InferenceService; real HTTP server)", () => {
  let outcome: (req: EmbedRequest, ctx: HandlerContext) => Promise<unknown>;
  let seen: EmbedRequest[] = [];
  const handler = createOpenAiEmbeddings({
    embed: async (req, ctx) => {
      seen.push(req);
      return (await outcome(req, ctx)) as never;
    },
    interceptors: [mapErrors(createLogger("test", "silent"))],
    models: new Map([["m", MODEL]]),
    maxRequestBytes: 2_048,
    logger: createLogger("test", "silent"),
  });
  const server = http.createServer(handler);
  let url = "";
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  beforeEach(() => {
    seen = [];
    outcome = async (req, ctx) => {
      ctx.responseHeader.set("shoal-total-ms", "1.50");
      return create(EmbedResponseSchema, {
        model: req.model,
        embeddings: req.inputs.map((_, i) => ({ index: i, float32Le: new Uint8Array(new Float32Array([i, 0.1, -2.5]).buffer), tokens: 4 })),
        usage: { promptTokens: 4 * req.inputs.length, totalTokens: 4 * req.inputs.length },
      });
    };
  });

  const post = (body: unknown): Promise<Response> =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });

  test("float and base64 carry the same float32 values; usage and timing headers come through", async () => {
    const f = await post({ model: "m", input: ["a", "b"] });
    assert.equal(f.status, 200);
    assert.equal(f.headers.get("shoal-total-ms"), "1.50");
    const fb = (await f.json()) as { object: string; data: { object: string; index: number; embedding: number[] }[]; model: string; usage: unknown };
    assert.deepEqual(fb.data[1], { object: "embedding", index: 1, embedding: [1, Math.fround(0.1), -2.5] });
    assert.deepEqual(fb.usage, { prompt_tokens: 8, total_tokens: 8 });
    assert.equal(seen[0]?.options?.encoding, VectorEncoding.FLOAT32_LE);
    const b = (await (await post({ model: "m", input: "a", encoding_format: "base64" })).json()) as { data: { embedding: string }[] };
    const bytes = Buffer.from(b.data[0]!.embedding, "base64");
    assert.deepEqual(
      [0, 1, 2].map((i) => bytes.readFloatLE(i * 4)),
      [0, Math.fround(0.1), -2.5],
    );
  });

  test("Connect codes become HTTP statuses with OpenAI's error body; retry hints pass through as headers", async () => {
    const cases: Array<[unknown, number, string]> = [
      [new ConnectError("queue full", Code.ResourceExhausted, { "retry-after-ms": "250" }), 429, "rate_limit_error"],
      [new ConnectError("no worker", Code.Unavailable, { "retry-after": "2" }), 503, "server_error"],
      [new ConnectError("too slow", Code.DeadlineExceeded), 504, "server_error"],
      [new ModelNotFoundError("zzz"), 404, "invalid_request_error"],
      [new Error("boom"), 500, "server_error"],
    ];
    for (const [err, status, type] of cases) {
      outcome = () => Promise.reject(err);
      const res = await post({ model: "m", input: "a" });
      assert.equal(res.status, status);
      const body = (await res.json()) as { error: { type: string; code: string; message: string } };
      assert.equal(body.error.type, type);
      if (status === 429) assert.equal(res.headers.get("retry-after-ms"), "250");
      if (status === 503) assert.equal(res.headers.get("retry-after"), "2");
      if (status === 500) assert.equal(body.error.message, "internal error", "internals are not leaked");
    }
  });

  test("request validation: 400s name the parameter; dimensions must match the model; 413 past the limit", async () => {
    const bad: Array<[unknown, string | null]> = [
      [[1, 2], null],
      [{ input: "a" }, "model"],
      [{ model: "m" }, "input"],
      [{ model: "m", input: [[1, 2]] }, "input"],
      [{ model: "m", input: "a", encoding_format: "int8" }, "encoding_format"],
      [{ model: "m", input: "a", dimensions: 2 }, "dimensions"],
      [{ model: "m", input: "a", dimensions: "3" }, "dimensions"],
    ];
    for (const [body, param] of bad) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(((await res.json()) as { error: { param: string | null } }).error.param, param, JSON.stringify(body));
    }
    assert.equal((await post({ model: "m", input: "a", dimensions: 3, user: "u" })).status, 200);
    assert.equal(seen.length, 1, "invalid requests never reach Embed");
    assert.equal((await post({ model: "m", input: "x".repeat(4_000) })).status, 413);
  });

  test("openAiErrorFrom renames Shoal's `inputs[i]` to OpenAI's `input`", () => {
    const e = openAiErrorFrom(new ConnectError("inputs[1]: empty text", Code.InvalidArgument));
    assert.deepEqual(e, { status: 400, message: "input[1]: empty text", type: "invalid_request_error", param: "input", code: "invalid_argument" });
  });
});

describe("POST /v1/embeddings with API keys (stand-in Embed; real HTTP server)", () => {
  const KEY = "sk-acme-0123456789abcdef";
  const keys = new ApiKeys([{ tenant: "acme", sha256: hashApiKey(KEY), models: "*", lane: "interactive", source: "test" }]);
  const tenants: Array<string | undefined> = [];
  const handler = createOpenAiEmbeddings({
    embed: async (req, ctx) => {
      tenants.push(ctx.values.get(principalKey)?.tenant);
      return create(EmbedResponseSchema, { model: req.model, embeddings: [{ index: 0, float32Le: new Uint8Array(12), tokens: 1 }] });
    },
    models: new Map([["m", MODEL]]),
    maxRequestBytes: 2_048,
    // The Connect routes' key check and error mapping (app.ts), as the gateway chains them.
    interceptors: [mapErrors(createLogger("test", "silent")), requireApiKey(keys)],
    logger: createLogger("test", "silent"),
  });
  const server = http.createServer(handler);
  let url = "";
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  const post = (headers: Record<string, string>, body = JSON.stringify({ model: "m", input: "a" })): Promise<Response> =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

  test("no key or a wrong key: 401 in OpenAI's shape, before the body is read; the right key reaches Embed with its tenant", async () => {
    for (const headers of [{}, { authorization: "Bearer sk-wrong-0123456789abcdef" }] as Record<string, string>[]) {
      const res = await post(headers);
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="shoal"');
      const body = (await res.json()) as { error: { type: string; code: string } };
      assert.deepEqual([body.error.type, body.error.code], ["authentication_error", "invalid_api_key"]);
    }
    const ok = await post({ authorization: `Bearer ${KEY}` });
    assert.equal(ok.status, 200);
    assert.deepEqual(tenants, ["acme"]);
  });

  test("the 413 names the limit and its value", async () => {
    const res = await post({ authorization: `Bearer ${KEY}` }, JSON.stringify({ model: "m", input: "x".repeat(4_000) }));
    assert.equal(res.status, 413);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /exceeds the limit of 2048 bytes/);
  });
});
