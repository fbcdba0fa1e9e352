import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ensurePretrained, ensurePretrainedEnv } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { cosine } from "../infra/pretrained/cosine.ts";

/**
 * A catalog model on the PyTorch runtime sidecar (`runtime: sidecar:pytorch`, issue #21), served
 * through the whole path beside the same model on onnxruntime-node: the worker starts the sidecar
 * on the model's first job, both give the same vectors, and a sidecar killed under load costs no
 * job (the run in flight goes round the retry topic, a new sidecar reloads the model). The real
 * all-MiniLM-L6-v2 and torch on CPU; skipped only with SHOAL_SKIP_PRETRAINED=1.
 */
const skip = process.env["SHOAL_SKIP_PRETRAINED"] === "1" ? "SHOAL_SKIP_PRETRAINED=1" : false;
const TEXTS = ["A man is eating food.", "Kafka partitions are replicated across brokers.", "Hello!", "The reef hides a shoal of small fish."];

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

  test("loses no job when the sidecar is killed under load", { timeout: 300_000 }, async () => {
    const long = `${TEXTS.join(" ")} `.repeat(4);
    const worker = cluster.workers[0]!;
    const retriedLine = (l: { msg?: string }) => l.msg === "job failed; retrying through the retry topic";
    // A kill can land between runs (everything answered in one batch): then nothing was in flight,
    // and the next round tries again with the new sidecar, up to three rounds.
    let pid = Number((await worker.waitForLog((l) => l.msg === "runtime sidecar up"))["pid"]);
    let generation = 1;
    for (let round = 0; round < 3 && !worker.logs.some(retriedLine); round++) {
      const calls = Array.from({ length: 24 }, (_, i) =>
        clients.inference.embed({ model: "minilm-torch", inputs: Array.from({ length: 8 }, (_, j) => `${round}.${i}.${j} ${long}`) }, { timeoutMs: 150_000 }),
      );
      // Kill it once the first answer is back, with the others queued or running.
      await Promise.race(calls);
      process.kill(pid, "SIGKILL");
      const answers = await Promise.all(calls);
      for (const a of answers)
        assert.deepEqual(
          a.embeddings.map((e) => e.values.length),
          Array(8).fill(384),
        );
      const killed = pid;
      const again = await worker.waitForLog((l) => l.msg === "runtime sidecar up" && Number(l["pid"]) !== killed);
      generation += 1;
      assert.equal(again["generation"], generation);
      pid = Number(again["pid"]);
    }
    const retried = worker.logs.find(retriedLine);
    assert.ok(retried, "a kill hit a run in flight, whose jobs went round the retry topic");
    assert.match(String(retried["reason"]), /sidecar .* (exited|closed its socket)/);
  });
});
