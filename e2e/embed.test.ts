import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { resolve } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff, norm, type Protocol } from "./harness/clients.ts";
import { REPO_ROOT } from "./harness/service-process.ts";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";

const SENTENCES = Array.from({ length: 32 }, (_, i) =>
  `Sentence ${i}: ${"the quick brown fox jumps over the lazy dog ".repeat(1 + (i % 7))}and ${i * 7919} more words`.trim(),
);

describe("Embed end to end (real Kafka, gateway and worker processes, real ONNX Runtime)", () => {
  let cluster: TestCluster;
  let model: string;
  before(async () => {
    cluster = await startCluster({ gateways: 1, workers: 1 });
    model = cluster.modelIds[0]!;
  });
  after(async () => {
    await cluster?.stop();
  });

  for (const protocol of ["connect", "connect-json", "grpc"] satisfies Protocol[]) {
    test(`${protocol}: one unit vector per input with the model's dimensions`, async () => {
      const { inference, models } = clientsFor(cluster.urls[0]!, protocol);
      const listed = await models.listModels({});
      const info = listed.models.find((m) => m.id === model);
      assert.ok(info, "ListModels lists the served model");
      const res = await inference.embed({ model, inputs: SENTENCES.slice(0, 3) });
      assert.equal(res.model, model);
      assert.equal(res.embeddings.length, 3);
      for (const [i, e] of res.embeddings.entries()) {
        assert.equal(e.index, i);
        assert.equal(e.values.length, info.dimensions);
        assert.ok(Math.abs(norm(e.values) - 1) < 1e-5, `unit norm, got ${norm(e.values)}`);
        assert.ok(e.tokens > 2);
      }
      assert.notDeepEqual(res.embeddings[0]!.values, res.embeddings[1]!.values);
      assert.equal(
        res.usage?.promptTokens,
        res.embeddings.reduce((n, e) => n + e.tokens, 0),
      );
    });
  }

  test("the same text gets the same vector alone and batched with 31 others (within 1e-5)", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const alone = await inference.embed({ model, inputs: [SENTENCES[5]!] });
    const together = await inference.embed({ model, inputs: SENTENCES });
    const concurrent = await Promise.all(SENTENCES.map((s) => inference.embed({ model, inputs: [s] })));
    assert.ok(maxAbsDiff(alone.embeddings[0]!.values, together.embeddings[5]!.values) < 1e-5);
    assert.ok(maxAbsDiff(alone.embeddings[0]!.values, concurrent[5]!.embeddings[0]!.values) < 1e-5);
  });

  test("VECTOR_ENCODING_FLOAT32_LE returns the same vectors as raw bytes", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const floats = await inference.embed({ model, inputs: SENTENCES.slice(0, 4) });
    const packed = await inference.embed({ model, inputs: SENTENCES.slice(0, 4), options: { encoding: VectorEncoding.FLOAT32_LE } });
    for (const [i, e] of packed.embeddings.entries()) {
      assert.equal(e.values.length, 0);
      const bytes = Buffer.from(e.float32Le);
      const v = Array.from({ length: bytes.length / 4 }, (_, k) => bytes.readFloatLE(k * 4));
      assert.deepEqual(v, floats.embeddings[i]!.values);
    }
  });

  test("normalize=false returns the raw pooled vector", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const raw = await inference.embed({ model, inputs: [SENTENCES[1]!], options: { normalize: false } });
    const unit = await inference.embed({ model, inputs: [SENTENCES[1]!] });
    const n = norm(raw.embeddings[0]!.values);
    assert.ok(Math.abs(n - 1) > 1e-3, `raw vector is not unit length (norm ${n})`);
    const scaled = raw.embeddings[0]!.values.map((x) => x / n);
    assert.ok(maxAbsDiff(scaled, unit.embeddings[0]!.values) < 1e-5);
  });

  test("an independent @grpc/grpc-js client built from proto/ gets the same vectors", async () => {
    const def = protoLoader.loadSync(resolve(REPO_ROOT, "proto/shoal/v1/inference.proto"), {
      includeDirs: [resolve(REPO_ROOT, "proto")],
      longs: Number,
      defaults: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      shoal: { v1: { InferenceService: grpc.ServiceClientConstructor } };
    };
    const url = new URL(cluster.urls[0]!);
    const client = new pkg.shoal.v1.InferenceService(url.host, grpc.credentials.createInsecure());
    try {
      const res = await new Promise<{ embeddings: { values: number[] }[] }>((ok, fail) =>
        client["embed"]!({ model, inputs: [SENTENCES[2]] }, { deadline: Date.now() + 20_000 }, (err: Error | null, r: never) => (err ? fail(err) : ok(r))),
      );
      const { inference } = clientsFor(cluster.urls[0]!, "connect");
      const viaConnect = await inference.embed({ model, inputs: [SENTENCES[2]!] });
      assert.ok(maxAbsDiff(res.embeddings[0]!.values, viaConnect.embeddings[0]!.values) < 1e-6);
    } finally {
      client.close();
    }
  });

  test("health and readiness answer", async () => {
    const base = cluster.urls[0]!;
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
  });
});
