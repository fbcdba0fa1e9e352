import assert from "node:assert/strict";
import { test } from "node:test";
import { trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { Attr, type Catalog } from "@shoal/common";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { hashApiKey } from "./api-keys.ts";
import { ApiKeys, requireApiKey } from "./auth.ts";
import { createModelService } from "./model-service.ts";
import { traceRpc } from "./rpc-tracing.ts";

test("the SERVER span carries the caller's tenant as shoal.tenant (in-memory exporter, in-process router)", async () => {
  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  const KEY = "sk-acme-0123456789abcdef";
  const keys = new ApiKeys([{ tenant: "acme", sha256: hashApiKey(KEY), models: "*", lane: "interactive", source: "test" }]);
  const catalog = { path: "", pools: new Map(), models: new Map() } as unknown as Catalog;
  const transport = createRouterTransport((router) => router.service(ModelService, createModelService(catalog)), {
    router: { interceptors: [traceRpc("gw-test"), requireApiKey(keys)] },
  });
  const models = createClient(ModelService, transport);
  await models.listModels({}, { headers: { authorization: `Bearer ${KEY}` } });
  await assert.rejects(models.listModels({}));
  const [ok, refused] = exporter.getFinishedSpans();
  assert.equal(ok?.name, "shoal.v1.ModelService/ListModels");
  assert.equal(ok?.attributes[Attr.TENANT], "acme");
  assert.equal(refused?.attributes[Attr.TENANT], undefined, "no tenant without a key");
  trace.disable();
});
