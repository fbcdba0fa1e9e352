import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { buildServices } from "../infra/image/build-services.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, norm } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";

describe("compiled services (npm run build:services): node dist/gateway.js and dist/worker.js, no tsx", () => {
  let cluster: TestCluster;
  let outDir: string;
  before(async () => {
    // Inside the clone (gitignored) so the external packages resolve from its node_modules.
    outDir = await mkdtemp(join(REPO_ROOT, ".tmp-built-"));
    const files = await buildServices(outDir, { assets: true });
    assert.deepEqual(files.map((f) => f.split("/").pop()).sort(), ["gateway.js", "inference-thread-entry.mjs", "json-thread-entry.mjs", "worker.js"]);
    // The files the services read beside their code, where the bundles look first (firstExisting).
    for (const asset of ["sidecar-pytorch/sidecar.py", "sidecar-pytorch/frames.py", "console/index.html"]) {
      assert.ok(existsSync(join(outDir, asset)), `${asset} beside the bundles`);
    }
    cluster = await startCluster({ builtDir: outDir });
  });
  after(async () => {
    await cluster?.stop();
    if (outDir) await rm(outDir, { recursive: true, force: true });
  });

  test("the built gateway and worker serve an Embed over Connect and gRPC", async () => {
    const model = cluster.modelIds[0]!;
    for (const protocol of ["connect", "grpc"] as const) {
      const { inference } = clientsFor(cluster.urls[0]!, protocol);
      const res = await inference.embed({ model, inputs: ["hello world", "goodbye"] });
      assert.equal(res.embeddings.length, 2);
      for (const e of res.embeddings) assert.ok(Math.abs(norm(e.values) - 1) < 1e-5);
      assert.notDeepEqual(res.embeddings[0]!.values, res.embeddings[1]!.values);
    }
  });

  test("the built services write nothing outside their JSON log (no stderr)", () => {
    for (const p of [...cluster.gateways, ...cluster.workers]) {
      const stderr = p.logs.filter((l) => l.level === "stderr").map((l) => l.msg);
      assert.deepEqual(stderr, [], `${p.name} wrote to stderr`);
    }
  });
});
