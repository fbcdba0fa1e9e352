import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, norm } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * A worker on a simulated accelerator (issue #16): the whole path — gateway, Kafka, batching,
 * residency, replies — runs unchanged, with synthetic answers of the right shape and timings
 * from the profile, and the worker says it is simulated.
 */
describe("a worker on a simulated accelerator (SHOAL_RUNTIME=simulated:gpu-a100-bert)", () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;
  let workerUrl: string;

  before(async () => {
    cluster = await startCluster({
      presets: ["tiny", "tiny-rerank", "tiny-classify"],
      workerEnv: { SHOAL_RUNTIME: "simulated:gpu-a100-bert", SHOAL_SIM_DILATION: "10", SHOAL_SIM_LOAD_MS: "10", SHOAL_INFERENCE_THREADS: "1" },
    });
    clients = clientsFor(cluster.urls[0]!, "connect");
    const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    workerUrl = `http://127.0.0.1:${String(line["httpPort"])}`;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("says it is simulated: a log line at start and the runtime label in its metrics", async () => {
    const line = await cluster.workers[0]!.waitForLog((l) => typeof l.msg === "string" && l.msg.startsWith("SIMULATED accelerator runtime"));
    assert.equal(line["runtime"], "simulated:gpu-a100-bert");
    assert.equal(line["dilation"], 10);
    const metrics = await scrape(`${workerUrl}/metrics`);
    assert.equal(total(metrics, "shoal_worker_runtime_info", { runtime: "simulated:gpu-a100-bert" }), 1);
  });

  test("answers every task with the model's shape, deterministically", async () => {
    const [embedder, reranker, classifier] = cluster.modelIds;
    const a = await clients.inference.embed({ model: embedder!, inputs: ["hello world", "goodbye"] }, { timeoutMs: 20_000 });
    const b = await clients.inference.embed({ model: embedder!, inputs: ["hello world"] }, { timeoutMs: 20_000 });
    assert.equal(a.embeddings.length, 2);
    for (const e of a.embeddings) assert.ok(Math.abs(norm(e.values) - 1) < 1e-4);
    assert.deepEqual(b.embeddings[0]!.values, a.embeddings[0]!.values, "same text, same vector");
    assert.notDeepEqual(a.embeddings[1]!.values, a.embeddings[0]!.values);
    // Dilated profile cost of one call: (0.42 ms + tokens × 0.95 µs) × 10 ≥ 4.2 ms; the job reports
    // its longest batch, and one CI run saw 3.3 ms. A real tiny model takes well under 1 ms, so a
    // bound of 2 ms still tells simulated time from computed time.
    assert.ok(a.timing!.inferenceMs >= 2, `inference ${a.timing!.inferenceMs} ms`);

    const ranked = await clients.inference.rerank({ model: reranker!, query: "a shoal", documents: ["fish", "sand", "reef"] }, { timeoutMs: 20_000 });
    assert.deepEqual(ranked.results.map((r) => r.index).sort(), [0, 1, 2]);
    for (const r of ranked.results) assert.ok(r.score > 0 && r.score < 1);

    const classified = await clients.inference.classify({ model: classifier!, inputs: ["an invoice"] }, { timeoutMs: 20_000 });
    const scores = classified.classifications[0]!.labels.map((l) => l.score);
    assert.ok(scores.length >= 2 && Math.abs(scores.reduce((s, x) => s + x, 0) - 1) < 1e-4, "softmax over the labels");
  });
});
