import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";

const BUF = resolve(REPO_ROOT, "node_modules/.bin/buf");
const run = promisify(execFile);

/** Runs `buf curl` (the @bufbuild/buf npm binary) with reflection only: no --schema, no protos. */
async function bufCurl(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(BUF, ["curl", "--http2-prior-knowledge", ...args], { cwd: "/", timeout: 60_000 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`buf curl ${args.join(" ")} failed: ${e.stderr ?? e.message}`);
  }
}

describe("gRPC server reflection: buf curl lists and calls the gateway without the .proto files", () => {
  let cluster: TestCluster;
  let model: string;
  let base: string;
  before(async () => {
    assert.ok(existsSync(BUF), `${BUF} missing: run npm install`);
    cluster = await startCluster();
    model = cluster.modelIds[0]!;
    base = cluster.urls[0]!;
  });
  after(async () => {
    await cluster?.stop();
  });

  for (const reflectProtocol of ["grpc-v1", "grpc-v1alpha"]) {
    test(`${reflectProtocol}: --list-services and --list-methods name Shoal's API, health and reflection`, async () => {
      const services = (await bufCurl("--reflect-protocol", reflectProtocol, "--list-services", base)).trim().split("\n").sort();
      assert.deepEqual(services, [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "shoal.v1.ClusterService",
        "shoal.v1.InferenceService",
        "shoal.v1.ModelAdminService",
        "shoal.v1.ModelService",
      ]);
      const methods = (await bufCurl("--reflect-protocol", reflectProtocol, "--list-methods", base)).trim().split("\n");
      for (const m of [
        "shoal.v1.InferenceService/Embed",
        "shoal.v1.InferenceService/Rerank",
        "shoal.v1.InferenceService/Classify",
        "shoal.v1.ClusterService/GetCluster",
        "shoal.v1.ModelService/ListModels",
        "shoal.v1.ModelService/GetModel",
        "shoal.v1.ModelAdminService/AddModel",
        "shoal.v1.ModelAdminService/SetAlias",
        "grpc.health.v1.Health/Check",
        "grpc.health.v1.Health/Watch",
      ]) {
        assert.ok(methods.includes(m), `${m} listed in:\n${methods.join("\n")}`);
      }
    });
  }

  for (const protocol of ["grpc", "connect", "grpcweb"]) {
    test(`--reflect then call Embed over ${protocol}: same vector as a typed client`, async () => {
      const out = await bufCurl(
        "--protocol",
        protocol,
        "-d",
        JSON.stringify({ model, inputs: ["reflection finds the schema"] }),
        `${base}/shoal.v1.InferenceService/Embed`,
      );
      const res = JSON.parse(out) as { model: string; embeddings: { values: number[] }[]; usage: { promptTokens: number } };
      assert.equal(res.model, model);
      const typed = await clientsFor(base, "connect").inference.embed({ model, inputs: ["reflection finds the schema"] });
      assert.ok(maxAbsDiff(res.embeddings[0]!.values, typed.embeddings[0]!.values) < 1e-6);
      assert.equal(res.usage.promptTokens, typed.usage?.promptTokens);
    });
  }

  test("ListModels through reflection answers with the served model; an unknown method is reported", async () => {
    const out = JSON.parse(await bufCurl("--protocol", "grpc", `${base}/shoal.v1.ModelService/ListModels`)) as { models: { id: string }[] };
    assert.deepEqual(
      out.models.map((m) => m.id),
      [model],
    );
    await assert.rejects(bufCurl(`${base}/shoal.v1.ModelService/NoSuchMethod`), /NoSuchMethod/);
  });
});
