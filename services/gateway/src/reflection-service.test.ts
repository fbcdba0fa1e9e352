import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { create, createFileRegistry, fromBinary, type DescFile, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import { createClient, type Client } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "@shoal/gen/grpc/health/v1/health_pb.ts";
import * as v1 from "@shoal/gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "@shoal/gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { registerReflection } from "./reflection-service.ts";

type Question = MessageInitShape<typeof v1.ServerReflectionRequestSchema>["messageRequest"];

/** Rebuilds a registry from reflection's FileDescriptorProtos alone, as grpcurl does. */
function registryFrom(protos: Uint8Array[]): ReturnType<typeof createFileRegistry> {
  const byName = new Map<string, FileDescriptorProto>();
  for (const b of protos) {
    const fdp = fromBinary(FileDescriptorProtoSchema, b);
    byName.set(fdp.name, fdp);
  }
  const first = fromBinary(FileDescriptorProtoSchema, protos[0]!);
  return createFileRegistry(first, (name): FileDescriptorProto | DescFile | undefined => byName.get(name));
}

describe("gRPC server reflection over the generated descriptors (real Connect server on port 0, gRPC client)", () => {
  const server = http2.createServer(connectNodeAdapter({ routes: (r) => registerReflection(r, [InferenceService, ModelService, Health]) }));
  let client: Client<typeof v1.ServerReflection>;
  let alpha: Client<typeof v1alpha.ServerReflection>;
  before(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const transport = createGrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    client = createClient(v1.ServerReflection, transport);
    alpha = createClient(v1alpha.ServerReflection, transport);
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  after(async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  async function ask(...questions: Question[]): Promise<v1.ServerReflectionResponse[]> {
    async function* requests(): AsyncIterable<v1.ServerReflectionRequest> {
      for (const q of questions) yield create(v1.ServerReflectionRequestSchema, { host: "gw", messageRequest: q });
    }
    const out: v1.ServerReflectionResponse[] = [];
    for await (const res of client.serverReflectionInfo(requests())) out.push(res);
    return out;
  }

  test("one stream answers several requests in order, echoing host and the original request", async () => {
    const [list, byFile, missing] = await ask(
      { case: "listServices", value: "" },
      { case: "fileByFilename", value: "shoal/v1/common.proto" },
      { case: "fileContainingSymbol", value: "shoal.v1.NoSuchThing" },
    );
    assert.equal(list?.messageResponse.case, "listServicesResponse");
    assert.deepEqual(list.messageResponse.value.service.map((s) => s.name).sort(), [
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "grpc.reflection.v1alpha.ServerReflection",
      "shoal.v1.InferenceService",
      "shoal.v1.ModelService",
    ]);
    assert.equal(list.validHost, "gw");
    assert.equal(list.originalRequest?.messageRequest.case, "listServices");
    assert.equal(byFile?.messageResponse.case, "fileDescriptorResponse");
    assert.equal(fromBinary(FileDescriptorProtoSchema, byFile.messageResponse.value.fileDescriptorProto[0]!).name, "shoal/v1/common.proto");
    assert.equal(missing?.messageResponse.case, "errorResponse");
    assert.equal(missing.messageResponse.value.errorCode, 5);
  });

  for (const symbol of [
    "shoal.v1.InferenceService",
    "shoal.v1.InferenceService.Embed",
    "shoal.v1.EmbedRequest",
    "shoal.v1.EmbedOptions.encoding",
    "shoal.v1.VECTOR_ENCODING_FLOAT32_LE",
  ]) {
    test(`file_containing_symbol ${symbol}: the file and its imports rebuild the full Embed schema`, async () => {
      const [res] = await ask({ case: "fileContainingSymbol", value: symbol });
      assert.equal(res?.messageResponse.case, "fileDescriptorResponse");
      const protos = res.messageResponse.value.fileDescriptorProto;
      const names = protos.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
      assert.deepEqual(names, ["shoal/v1/inference.proto", "shoal/v1/common.proto"]);
      const registry = registryFrom(protos);
      const embed = registry.getService("shoal.v1.InferenceService")?.methods.find((m) => m.name === "Embed");
      assert.equal(embed?.input.typeName, "shoal.v1.EmbedRequest");
      assert.equal(registry.getMessage("shoal.v1.EmbedResponse")?.field["usage"]?.message?.typeName, "shoal.v1.Usage");
    });
  }

  test("extensions: none declared, so numbers are empty for a known type and NOT_FOUND otherwise", async () => {
    const [known, unknown, ext] = await ask(
      { case: "allExtensionNumbersOfType", value: "shoal.v1.EmbedRequest" },
      { case: "allExtensionNumbersOfType", value: "nope.Nope" },
      { case: "fileContainingExtension", value: { containingType: "shoal.v1.EmbedRequest", extensionNumber: 100 } },
    );
    assert.equal(known?.messageResponse.case, "allExtensionNumbersResponse");
    assert.deepEqual(known.messageResponse.value.extensionNumber, []);
    assert.equal(unknown?.messageResponse.case, "errorResponse");
    assert.equal(ext?.messageResponse.case, "errorResponse");
  });

  test("v1alpha answers the same way (older grpcurl and grpc clients ask for it)", async () => {
    async function* one(): AsyncIterable<v1alpha.ServerReflectionRequest> {
      yield create(v1alpha.ServerReflectionRequestSchema, { messageRequest: { case: "fileContainingSymbol", value: "shoal.v1.ModelService" } });
    }
    const out: v1alpha.ServerReflectionResponse[] = [];
    for await (const r of alpha.serverReflectionInfo(one())) out.push(r);
    assert.equal(out[0]?.messageResponse.case, "fileDescriptorResponse");
    assert.equal(fromBinary(FileDescriptorProtoSchema, out[0].messageResponse.value.fileDescriptorProto[0]!).name, "shoal/v1/model.proto");
  });
});
