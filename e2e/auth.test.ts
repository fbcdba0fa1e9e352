import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { Kafka, logLevel } from "kafkajs";
import OpenAI from "openai";
import { decodeEnvelope, jobsTopic } from "@shoal/common";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@shoal/gen/grpc/health/v1/health_pb.ts";
import { ServerReflection } from "@shoal/gen/grpc/reflection/v1/reflection_pb.ts";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { JobEnvelope } from "@shoal/gen/shoal/v1/job_pb.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { scrape, total } from "./harness/prometheus.ts";

const ACME = `sk-acme-${randomBytes(12).toString("hex")}`; // one model, interactive
const OPS = `sk-ops-${randomBytes(12).toString("hex")}`; // every model, batch lane by default (from the file, as a hash)
const SLOW = `sk-slow-${randomBytes(12).toString("hex")}`; // 2 requests/s, burst 2
const MAX_REQUEST_BYTES = 64 * 1024;
const MODEL_A = "shoal-tiny-embed";
const MODEL_B = "shoal-tiny-embed-b";

type Proto = "connect" | "grpc";

function clients(base: string, protocol: Proto, key?: string) {
  const auth: Interceptor[] =
    key === undefined
      ? []
      : [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${key}`);
            return next(req);
          },
        ];
  const transport =
    protocol === "grpc"
      ? createGrpcTransport({ baseUrl: base, interceptors: auth })
      : createConnectTransport({ baseUrl: base, httpVersion: "1.1", interceptors: auth });
  return { inference: createClient(InferenceService, transport), models: createClient(ModelService, transport), health: createClient(Health, transport) };
}

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  return assert.fail("expected the call to fail");
}

describe("API keys: tenants, model lists, rate limits (real gateway, worker and broker)", () => {
  let cluster: TestCluster;
  let base: string;
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), "shoal-e2e-keys-"));
    const file = join(dir, "keys.yaml");
    const opsHash = createHash("sha256").update(OPS).digest("hex");
    await writeFile(file, `keys:\n  - tenant: ops\n    sha256: ${opsHash}\n    models: "*"\n    lane: batch\n`);
    cluster = await startCluster({
      presets: ["tiny", "tiny-embed-b"],
      gatewayEnv: {
        SHOAL_API_KEYS: `acme=${ACME};models=${MODEL_A}, slow=${SLOW};requestsPerSecond=2;burst=2`,
        SHOAL_API_KEYS_FILE: file,
        SHOAL_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES),
      },
    });
    base = cluster.urls[0]!;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("missing and unknown keys are Unauthenticated over Connect and gRPC; a valid key embeds; keys are never logged", async () => {
    for (const protocol of ["connect", "grpc"] as const) {
      const missing = await failure(clients(base, protocol).inference.embed({ model: MODEL_A, inputs: ["hi"] }));
      assert.equal(missing.code, Code.Unauthenticated, protocol);
      assert.match(missing.rawMessage, /missing API key/);
      const wrong = await failure(clients(base, protocol, `${ACME}0`).models.listModels({}));
      assert.equal(wrong.code, Code.Unauthenticated, protocol);
      assert.match(wrong.rawMessage, /API key not recognised/);
      const ok = await clients(base, protocol, ACME).inference.embed({ model: MODEL_A, inputs: ["hello", "world"] });
      assert.equal(ok.embeddings.length, 2);
    }
    const logs = JSON.stringify(cluster.gateways[0]!.logs);
    for (const key of [ACME, OPS, SLOW]) assert.equal(logs.includes(key), false, "a key appears in the gateway's logs");
  });

  test("health checks, reflection, /healthz and /readyz stay open without a key; /metrics needs one", async () => {
    assert.equal((await clients(base, "grpc").health.check({})).status, Serving.SERVING);
    const reflection = createClient(ServerReflection, createGrpcTransport({ baseUrl: base }));
    const services: string[] = [];
    for await (const res of reflection.serverReflectionInfo(
      (async function* () {
        yield { messageRequest: { case: "listServices" as const, value: "" } };
      })(),
    )) {
      if (res.messageResponse.case === "listServicesResponse") services.push(...res.messageResponse.value.service.map((s) => s.name));
    }
    assert.ok(services.includes(InferenceService.typeName));
    for (const path of ["/healthz", "/readyz"]) assert.equal((await fetch(`${base}${path}`)).status, 200, path);
    assert.equal((await fetch(`${base}/metrics`)).status, 401);
    assert.equal((await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ACME}` } })).status, 200);
  });

  test("a model outside the key's list is PermissionDenied; ListModels shows only the key's models", async () => {
    const acme = clients(base, "connect", ACME);
    const denied = await failure(acme.inference.embed({ model: MODEL_B, inputs: ["hi"] }));
    assert.equal(denied.code, Code.PermissionDenied);
    assert.match(denied.rawMessage, new RegExp(`tenant 'acme' may not use model '${MODEL_B}'`));
    // Even a model that does not exist: a restricted key learns nothing about the catalog.
    assert.equal((await failure(acme.inference.embed({ model: "no-such-model", inputs: ["hi"] }))).code, Code.PermissionDenied);
    assert.equal((await failure(acme.models.getModel({ id: MODEL_B }))).code, Code.PermissionDenied);
    assert.deepEqual(
      (await acme.models.listModels({})).models.map((m) => m.id),
      [MODEL_A],
    );
    const all = await clients(base, "grpc", OPS).models.listModels({});
    assert.deepEqual(all.models.map((m) => m.id).sort(), [MODEL_A, MODEL_B]);
    assert.ok(
      all.models.every((m) => m.defaultLane === Lane.BATCH),
      "the ops key's default lane",
    );
    // An unrestricted key still gets NotFound for an unknown model.
    assert.equal((await failure(clients(base, "grpc", OPS).inference.embed({ model: "no-such-model", inputs: ["hi"] }))).code, Code.NotFound);
  });

  test("past the key's rate: ResourceExhausted with retry-after-ms (Connect and gRPC), then it recovers", async () => {
    for (const protocol of ["connect", "grpc"] as const) {
      const slow = clients(base, protocol, SLOW);
      // Start from a full bucket (2 tokens at 2/s).
      await new Promise((r) => setTimeout(r, 1_100));
      await slow.models.listModels({});
      await slow.models.listModels({});
      const limited = await failure(slow.models.listModels({}));
      assert.equal(limited.code, Code.ResourceExhausted, protocol);
      assert.match(limited.rawMessage, /tenant 'slow': rate limit of 2 requests\/s \(burst 2\) reached; retry after \d+ ms/);
      const retryMs = Number(limited.metadata.get("retry-after-ms"));
      assert.ok(retryMs > 0 && retryMs <= 500, `retry-after-ms ${retryMs}`);
      assert.equal(limited.metadata.get("retry-after"), "1");
      await new Promise((r) => setTimeout(r, retryMs + 20));
      assert.equal((await slow.inference.embed({ model: MODEL_A, inputs: ["after the wait"] })).embeddings.length, 1, protocol);
    }
  });

  test("the OpenAI endpoint: 401 in OpenAI's error shape without a valid key; embeddings with one (official SDK)", async () => {
    const raw = await fetch(`${base}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL_A, input: "hi" }),
    });
    assert.equal(raw.status, 401);
    assert.equal(raw.headers.get("www-authenticate"), 'Bearer realm="shoal"');
    const body = (await raw.json()) as { error: { message: string; type: string; param: unknown; code: string } };
    assert.deepEqual(body.error, {
      message: "missing API key: send 'authorization: Bearer <key>'",
      type: "authentication_error",
      param: null,
      code: "invalid_api_key",
    });

    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: "sk-not-a-real-key-000000", maxRetries: 0 });
    await assert.rejects(wrong.embeddings.create({ model: MODEL_A, input: "hi" }), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const acme = new OpenAI({ baseURL: `${base}/v1`, apiKey: ACME, maxRetries: 0 });
    const res = await acme.embeddings.create({ model: MODEL_A, input: ["hello"] });
    assert.equal(res.data.length, 1);
    await assert.rejects(acme.embeddings.create({ model: MODEL_B, input: "hi" }), (e) => e instanceof OpenAI.PermissionDeniedError && e.status === 403);
  });

  test("the tenant reaches the job envelope (and the key's default lane its topic) and the requests metric", async () => {
    const kafka = new Kafka({ clientId: "e2e-auth-peek", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING });
    // A group of its own reads the jobs topics from the start without touching the worker's group.
    const consumer = kafka.consumer({ groupId: `e2e-auth-peek-${randomBytes(4).toString("hex")}` });
    const seen: Array<{ topic: string; envelope: JobEnvelope }> = [];
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [jobsTopic(cluster.pool, Lane.INTERACTIVE), jobsTopic(cluster.pool, Lane.BATCH)], fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ topic, message }) => {
          try {
            seen.push({ topic, envelope: decodeEnvelope(message.value) });
          } catch {
            // not a job envelope: not ours to judge here
          }
        },
      });
      const before = await scrape(`${base}/metrics`, ACME);
      await clients(base, "grpc", ACME).inference.embed({ model: MODEL_A, inputs: ["tenant acme"] });
      await clients(base, "connect", OPS).inference.embed({ model: MODEL_B, inputs: ["tenant ops, no lane named"] });
      const deadline = Date.now() + 30_000;
      const find = (tenant: string) =>
        seen.find((s) => s.envelope.tenant === tenant && s.envelope.task.case === "embed" && s.envelope.task.value.inputs[0]?.startsWith("tenant"));
      while ((!find("acme") || !find("ops")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.equal(find("acme")?.topic, jobsTopic(cluster.pool, Lane.INTERACTIVE));
      assert.equal(find("ops")?.topic, jobsTopic(cluster.pool, Lane.BATCH));
      assert.equal(find("ops")?.envelope.lane, Lane.BATCH);

      const after = await scrape(`${base}/metrics`, ACME);
      const delta = (m: Record<string, string>): number => total(after, "shoal_gateway_requests_total", m) - total(before, "shoal_gateway_requests_total", m);
      assert.equal(delta({ method: "Embed", tenant: "acme", model: MODEL_A, lane: "interactive", code: "ok" }), 1);
      assert.equal(delta({ method: "Embed", tenant: "ops", model: MODEL_B, lane: "batch", code: "ok" }), 1);
      // Refused calls are counted too, under no tenant.
      assert.ok(total(after, "shoal_gateway_requests_total", { tenant: "", code: "Unauthenticated" }) >= 4);
    } finally {
      await consumer.disconnect();
    }
  });

  test("hard limits name the limit and its value: body size over Connect, gRPC and the OpenAI endpoint", async () => {
    const big = "x".repeat(MAX_REQUEST_BYTES);
    for (const protocol of ["connect", "grpc"] as const) {
      const e = await failure(clients(base, protocol, ACME).inference.embed({ model: MODEL_A, inputs: [big, big] }));
      assert.equal(e.code, Code.ResourceExhausted, protocol);
      assert.match(e.rawMessage, new RegExp(`larger than configured readMaxBytes ${MAX_REQUEST_BYTES}`), protocol);
    }
    const res = await fetch(`${base}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME}` },
      body: JSON.stringify({ model: MODEL_A, input: [big, big] }),
    });
    assert.equal(res.status, 413);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, new RegExp(`exceeds the limit of ${MAX_REQUEST_BYTES} bytes`));
  });
});
