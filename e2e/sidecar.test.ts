import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ensurePretrained, ensurePretrainedEnv } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";

/**
 * A catalog model on the PyTorch runtime sidecar (`runtime: sidecar:pytorch`, issue #21), served
 * through the whole path beside the same model on onnxruntime-node: the worker starts the sidecar
 * on the model's first job, both give the same vectors, and a sidecar killed under load costs no
 * job (the run in flight goes round the retry topic, a new sidecar reloads the model). The real
 * all-MiniLM-L6-v2 and torch on CPU; skipped only with SHOAL_SKIP_PRETRAINED=1.
 */
const skip = process.env["SHOAL_SKIP_PRETRAINED"] === "1" ? "SHOAL_SKIP_PRETRAINED=1" : false;
const TEXTS = ["A man is eating food.", "Kafka partitions are replicated across brokers.", "Hello!", "The reef hides a shoal of small fish."];

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

describe("a model on the PyTorch runtime sidecar, through the cluster", { skip }, () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;

  before(
    async () => {
      const dir = await ensurePretrained();
      const env = await ensurePretrainedEnv();
      cluster = await startCluster({
        presets: [],
        entries: [
          { dir, fields: { id: "minilm-onnx" } },
          { dir, fields: { id: "minilm-torch", runtime: "sidecar:pytorch" } },
        ],
        workerEnv: { SHOAL_SIDECAR_PYTHON: env.python, SHOAL_SIDECAR_DEVICE: "cpu", SHOAL_SIDECAR_THREADS: "1", SHOAL_MEMORY_BUDGET: "2GiB" },
      });
      clients = clientsFor(cluster.urls[0]!, "connect");
    },
    { timeout: 20 * 60_000 },
  );
  after(async () => {
    await cluster?.stop();
  });

  test("gives the ONNX path's vectors (cosine >= 0.9999)", { timeout: 120_000 }, async () => {
    const torch = await clients.inference.embed({ model: "minilm-torch", inputs: TEXTS }, { timeoutMs: 90_000 });
    const onnx = await clients.inference.embed({ model: "minilm-onnx", inputs: TEXTS }, { timeoutMs: 90_000 });
    assert.equal(torch.embeddings.length, TEXTS.length);
    const cos = torch.embeddings.map((e, i) => cosine(e.values, onnx.embeddings[i]!.values));
    assert.ok(Math.min(...cos) >= 0.9999, `cosines ${cos.join(", ")}`);
    const up = await cluster.workers[0]!.waitForLog((l) => l.msg === "runtime sidecar up");
    assert.equal(up["device"], "cpu");
  });

  test("loses no job when the sidecar is killed under load", { timeout: 180_000 }, async () => {
    const up = await cluster.workers[0]!.waitForLog((l) => l.msg === "runtime sidecar up");
    const pid = Number(up["pid"]);
    const long = `${TEXTS.join(" ")} `.repeat(4);
    const calls = Array.from({ length: 24 }, (_, i) =>
      clients.inference.embed({ model: "minilm-torch", inputs: Array.from({ length: 8 }, (_, j) => `${i}.${j} ${long}`) }, { timeoutMs: 150_000 }),
    );
    // Kill it once the first answer is back, with the other 23 queued or running.
    await Promise.race(calls);
    process.kill(pid, "SIGKILL");
    const answers = await Promise.all(calls);
    for (const a of answers)
      assert.deepEqual(
        a.embeddings.map((e) => e.values.length),
        Array(8).fill(384),
      );
    const retried = await cluster.workers[0]!.waitForLog((l) => l.msg === "job failed; retrying through the retry topic");
    assert.match(String(retried["reason"]), /sidecar .* (exited|closed its socket)/);
    const again = await cluster.workers[0]!.waitForLog((l) => l.msg === "runtime sidecar up" && Number(l["pid"]) !== pid);
    assert.equal(again["generation"], 2);
  });
});
