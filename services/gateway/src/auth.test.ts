import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@shoal/gen/grpc/health/v1/health_pb.ts";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { Catalog, CatalogModel } from "@shoal/common";
import { hashApiKey, type ApiKeySpec } from "./api-keys.ts";
import { ApiKeys, principalKey, requireApiKey } from "./auth.ts";
import { PermissionDeniedError, RateLimitedError, toConnectError, UnauthenticatedError } from "./errors.ts";
import { createHealthService, HealthState } from "./health-service.ts";
import { createModelService } from "./model-service.ts";

const KEY_A = "sk-acme-0123456789abcdef";
const KEY_B = "sk-beta-fedcba9876543210";

function spec(tenant: string, key: string, extra: Partial<ApiKeySpec> = {}): ApiKeySpec {
  return { tenant, sha256: hashApiKey(key), models: "*", lane: "interactive", source: tenant, ...extra };
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return assert.fail("expected a throw");
}

describe("ApiKeys", () => {
  test("no key configured: authentication is off", () => {
    const keys = new ApiKeys([]);
    assert.equal(keys.enabled, false);
    assert.equal(keys.authenticate(undefined), undefined);
  });

  test("missing, malformed and unknown keys are Unauthenticated; a known key gives its tenant", () => {
    const keys = new ApiKeys([spec("acme", KEY_A), spec("beta", KEY_B, { lane: "batch" })]);
    for (const header of [undefined, null, "", `Basic ${KEY_A}`, "Bearer", "Bearer a b", `Bearer ${KEY_A}x`, KEY_A]) {
      const err = thrown(() => keys.authenticate(header));
      assert.ok(err instanceof UnauthenticatedError, String(header));
      assert.equal(toConnectError(err).code, Code.Unauthenticated);
      assert.equal((err as Error).message.includes(KEY_A), false);
    }
    assert.equal(keys.authenticate(`Bearer ${KEY_A}`)?.tenant, "acme");
    assert.equal(keys.authenticate(`bearer  ${KEY_B}`)?.lane, Lane.BATCH);
    assert.deepEqual(keys.tenants, ["acme", "beta"]);
  });

  test("models outside the key's list are PermissionDenied; an empty id is left to validation", () => {
    const keys = new ApiKeys([spec("acme", KEY_A, { models: ["m1"] })]);
    const p = keys.authenticate(`Bearer ${KEY_A}`)!;
    assert.equal(p.allows("m1"), true);
    assert.equal(p.allows("m2"), false);
    p.authorizeModel("m1");
    p.authorizeModel("");
    const err = thrown(() => p.authorizeModel("m2"));
    assert.ok(err instanceof PermissionDeniedError);
    assert.equal(toConnectError(err).code, Code.PermissionDenied);
    assert.match((err as Error).message, /tenant 'acme' may not use model 'm2'/);
  });

  test("request and token rates: ResourceExhausted with retry-after-ms naming the limit, then recovery", () => {
    let now = 0;
    const keys = new ApiKeys([spec("acme", KEY_A, { requests: { perSecond: 2, burst: 2 }, tokens: { perSecond: 100, burst: 100 } })], () => now);
    keys.authenticate(`Bearer ${KEY_A}`);
    const p = keys.authenticate(`Bearer ${KEY_A}`)!;
    const err = thrown(() => keys.authenticate(`Bearer ${KEY_A}`));
    assert.ok(err instanceof RateLimitedError);
    assert.equal(err.retryAfterMs, 500);
    const mapped = toConnectError(err);
    assert.equal(mapped.code, Code.ResourceExhausted);
    assert.equal(mapped.metadata.get("retry-after-ms"), "500");
    assert.equal(mapped.metadata.get("retry-after"), "1");
    assert.match(mapped.rawMessage, /tenant 'acme': rate limit of 2 requests\/s \(burst 2\) reached; retry after 500 ms/);
    now = 500;
    assert.equal(keys.authenticate(`Bearer ${KEY_A}`)?.tenant, "acme");

    p.chargeTokens(60);
    const tokens = thrown(() => p.chargeTokens(60));
    assert.ok(tokens instanceof RateLimitedError);
    assert.equal(tokens.retryAfterMs, 200);
    assert.match(tokens.message, /rate limit of 100 tokens\/s \(burst 100\) reached by a call of about 60 tokens/);
  });
});

describe("requireApiKey on a real Connect server (gRPC client): ModelService protected and filtered, Health open", () => {
  const models = new Map(
    ["m1", "m2"].map((id) => [
      id,
      {
        id,
        pool: "p",
        spec: { task: "embed", dimensions: 4, maxSequenceLength: 16, normalize: true, prompts: {}, matryoshka: false },
      } as unknown as CatalogModel,
    ]),
  );
  const catalog = { path: "", pools: new Map(), models } as unknown as Catalog;
  const keys = new ApiKeys([spec("acme", KEY_A, { models: ["m1"], lane: "batch" }), spec("ops", KEY_B)]);
  const health = new HealthState([ModelService.typeName]);
  health.setAll(Serving.SERVING);
  const seenTenants: Array<string | undefined> = [];
  // Outer interceptors read the caller the key check leaves behind, as the trace and metrics do.
  const observe: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } finally {
      seenTenants.push(req.contextValues.get(principalKey)?.tenant);
    }
  };
  const mapErrors: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw toConnectError(err);
    }
  };
  const server = http2.createServer(
    connectNodeAdapter({
      interceptors: [observe, mapErrors, requireApiKey(keys)],
      routes(router) {
        router.service(ModelService, createModelService(catalog));
        router.service(Health, createHealthService(health));
      },
    }),
  );
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  let baseUrl = "";
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  function clients(key?: string) {
    const transport = createGrpcTransport({
      baseUrl,
      interceptors:
        key === undefined
          ? []
          : [
              (next) => (req) => {
                req.header.set("authorization", `Bearer ${key}`);
                return next(req);
              },
            ],
    });
    return { models: createClient(ModelService, transport), health: createClient(Health, transport) };
  }

  test("no key: Unauthenticated on ModelService, SERVING on Health", async () => {
    const { models, health: h } = clients();
    await assert.rejects(
      models.listModels({}),
      (e) => ConnectError.from(e).code === Code.Unauthenticated && /missing API key/.test(ConnectError.from(e).rawMessage),
    );
    assert.equal((await h.check({})).status, Serving.SERVING);
    await assert.rejects(clients("sk-nobody-0000000000000000").models.listModels({}), (e) => ConnectError.from(e).code === Code.Unauthenticated);
  });

  test("ListModels shows only the key's models with its default lane; GetModel of another is PermissionDenied", async () => {
    const acme = clients(KEY_A).models;
    const listed = await acme.listModels({});
    assert.deepEqual(
      listed.models.map((m) => m.id),
      ["m1"],
    );
    assert.equal(listed.models[0]!.defaultLane, Lane.BATCH);
    await assert.rejects(acme.getModel({ id: "m2" }), (e) => ConnectError.from(e).code === Code.PermissionDenied);
    // An unrestricted key sees the whole catalog.
    assert.deepEqual(
      (await clients(KEY_B).models.listModels({})).models.map((m) => m.id),
      ["m1", "m2"],
    );
    assert.ok(seenTenants.includes("acme") && seenTenants.includes("ops"));
  });
});

test("messages quoting a caller's id are bounded and well-formed (gRPC percent-encodes them)", () => {
  const keys = new ApiKeys([spec("acme", KEY_A, { models: ["m1"] })]);
  const p = keys.authenticate(`Bearer ${KEY_A}`)!;
  const err = thrown(() => p.authorizeModel(`\ud800${"x".repeat(500)}`));
  const message = toConnectError(err).rawMessage;
  assert.doesNotThrow(() => encodeURIComponent(message));
  assert.ok(message.length < 200, message);
  assert.doesNotThrow(() => encodeURIComponent(toConnectError(new ConnectError("a \udfff b", Code.InvalidArgument)).rawMessage));
});
