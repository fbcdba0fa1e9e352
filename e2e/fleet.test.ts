import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ResidencyState, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { GetClusterResponse } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { mulberry32 } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff, norm } from "./harness/clients.ts";

/**
 * Six models of three tasks on two workers whose memory budgets hold two models each: every
 * worker serves any model of the pool, loading on demand and evicting the least recently used.
 */
const PRESETS = ["tiny", "tiny-embed-c", "mini", "tiny-rerank", "tiny-classify", "tiny-multilabel"];
/** Each model is declared at 10 MiB per session, one session per model on these workers. */
const BUDGET = "20MiB";

type Call = { model: string; task: Task; seed: number };
/** What a call returned, flattened to numbers for comparison. */
type Answer = number[];

const TEXTS = [
  "the quarterly report shows revenue growth",
  "a cat sleeps on the warm windowsill",
  "the striker scored twice in the final",
  "parliament debated the new budget bill",
  "a new chip doubles inference throughput",
  "researchers sequenced the genome of a rare frog",
];

function residentCounts(c: GetClusterResponse): number[] {
  return c.workers.map((w) => w.models.filter((m) => m.state === ResidencyState.RESIDENT || m.state === ResidencyState.LOADING).length);
}

describe("a fleet of models per worker: 6 models, 3 tasks, 2 workers with room for 2 models each", () => {
  let cluster: TestCluster;
  let models: Model[];
  let clients: ReturnType<typeof clientsFor>;

  before(async () => {
    cluster = await startCluster({
      presets: PRESETS,
      workers: 2,
      modelFields: { memory: "10MiB" },
      workerEnv: { SHOAL_MEMORY_BUDGET: BUDGET, SHOAL_RESIDENCY_POLICY: "lru", SHOAL_MODELS: "none", SHOAL_STATUS_INTERVAL_MS: "500" },
    });
    clients = clientsFor(cluster.urls[0]!, "connect");
    models = (await clients.models.listModels({})).models;
  });
  after(async () => {
    await cluster?.stop();
  });

  async function call({ model, task, seed }: Call): Promise<Answer> {
    const a = TEXTS[seed % TEXTS.length]!;
    const b = TEXTS[(seed + 1) % TEXTS.length]!;
    const c = TEXTS[(seed + 3) % TEXTS.length]!;
    switch (task) {
      case Task.EMBED: {
        const res = await clients.inference.embed({ model, inputs: [a, b] }, { timeoutMs: 30_000 });
        for (const e of res.embeddings) assert.ok(Math.abs(norm(e.values) - 1) < 1e-4, "unit vectors");
        return res.embeddings.flatMap((e) => e.values);
      }
      case Task.RERANK: {
        const res = await clients.inference.rerank({ model, query: a, documents: [b, c, a] }, { timeoutMs: 30_000 });
        assert.deepEqual([...res.results.map((r) => r.index)].sort(), [0, 1, 2], "every document once");
        for (let i = 1; i < res.results.length; i++) assert.ok(res.results[i - 1]!.score >= res.results[i]!.score, "sorted by score");
        for (const r of res.results) assert.ok(r.score > 0 && r.score < 1, "sigmoid scores");
        return [...res.results].sort((x, y) => x.index - y.index).map((r) => r.score);
      }
      case Task.CLASSIFY: {
        const res = await clients.inference.classify({ model, inputs: [a, c] }, { timeoutMs: 30_000 });
        const spec = models.find((m) => m.id === model)!;
        assert.equal(res.classifications.length, 2);
        const out: number[] = [];
        for (const cl of res.classifications) {
          assert.deepEqual([...cl.labels.map((l) => l.label)].sort(), [...spec.labels].sort(), "every label once");
          const byName = new Map(cl.labels.map((l) => [l.label, l.score]));
          out.push(...spec.labels.map((l) => byName.get(l)!));
        }
        return out;
      }
      default:
        throw new Error(`unexpected task ${task}`);
    }
  }

  test("the catalog lists 6 models of 3 tasks, none resident yet", () => {
    assert.equal(models.length, 6);
    assert.deepEqual(new Set(models.map((m) => m.task)), new Set([Task.EMBED, Task.RERANK, Task.CLASSIFY]));
    assert.deepEqual(models.find((m) => m.task === Task.CLASSIFY && m.labels.length === 3)?.labels, ["negative", "neutral", "positive"]);
  });

  test("a mixed stream over all 6 models: every request answered correctly, budgets kept, loads and evictions visible", async () => {
    const calls: Call[] = [];
    const rand = mulberry32(11);
    for (let i = 0; i < 90; i++) {
      const m = models[Math.floor(rand() * models.length)]!;
      calls.push({ model: m.id, task: m.task, seed: Math.floor(rand() * TEXTS.length) });
    }
    // Reference answers: each distinct call once, one at a time.
    const reference = new Map<string, Answer>();
    for (const c of calls) {
      const key = `${c.model}/${c.seed}`;
      if (!reference.has(key)) reference.set(key, await call(c));
    }
    // The stream: 6 at a time, in random order, while the cluster state is sampled.
    const samples: GetClusterResponse[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push(await clients.cluster.getCluster({}));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    let next = 0;
    const mismatches: string[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < calls.length) {
          const c = calls[next++]!;
          const got = await call(c);
          const diff = maxAbsDiff(got, reference.get(`${c.model}/${c.seed}`)!);
          if (!(diff < 1e-4)) mismatches.push(`${c.model} seed ${c.seed}: max diff ${diff}`);
        }
      }),
    );
    sampling = false;
    await sampler;
    assert.deepEqual(mismatches, [], "each answer equals the same call's answer alone");

    assert.ok(samples.length > 3, "the cluster state was sampled during the stream");
    for (const s of samples) {
      assert.equal(s.workers.length, 2, "both workers publish their status");
      for (const w of s.workers) assert.ok(w.memoryUsedBytes <= w.memoryBudgetBytes, `worker ${w.workerId} within its budget`);
      for (const n of residentCounts(s)) assert.ok(n <= 2, `at most 2 models held per worker (saw ${n})`);
    }
    // Loads and evictions through ListModels: every model was loaded somewhere, some more than once.
    await new Promise((r) => setTimeout(r, 1_200)); // one status interval after the stream
    const after = (await clients.models.listModels({})).models;
    const loads = after.map((m) => Number(m.loadCount));
    console.log(`loads per model: ${after.map((m) => `${m.id}=${m.loadCount}`).join(", ")}`);
    assert.ok(
      loads.every((n) => n >= 1),
      "every model was loaded",
    );
    assert.ok(loads.reduce((a, b) => a + b, 0) > 6, "models were evicted and loaded again: 6 models, room for 4");
    const resident = after.flatMap((m) => m.replicas.filter((r) => r.state === ResidencyState.RESIDENT).map((r) => `${m.id}@${r.workerId}`));
    assert.ok(resident.length >= 1 && resident.length <= 4, `resident replicas listed: ${resident.join(", ")}`);
    assert.ok(
      after.every((m) => m.loadCount === 0n || m.lastColdStartMs > 0),
      "cold-start time recorded",
    );
  });

  test("a model that does not exist is NotFound; the cluster keeps serving", async () => {
    await assert.rejects(clients.inference.rerank({ model: "no-such-model", query: "q", documents: ["d"] }), (err: unknown) => {
      assert.equal(ConnectError.from(err).code, Code.NotFound);
      return true;
    });
    const c = await clients.cluster.getCluster({});
    assert.equal(c.workers.length, 2);
    assert.ok(c.lanes.length >= 2, "lag per lane is reported");
  });
});

describe("a load never holds up jobs of resident models", () => {
  let cluster: TestCluster;
  before(async () => {
    // One worker with the tiny encoder resident and the MiniLM-shaped one (slowest to load) cold.
    cluster = await startCluster({ presets: ["tiny", "mini"], workerEnv: { SHOAL_MODELS: "shoal-tiny-embed", SHOAL_MEMORY_BUDGET: "4GiB" } });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("while the MiniLM-shaped model loads for its first job, the tiny model's jobs are answered", async () => {
    const { inference, cluster: state } = clientsFor(cluster.urls[0]!, "connect");
    const slow = cluster.modelIds.find((id) => id !== "shoal-tiny-embed")!;
    // The gateway reads worker statuses from the status topic: wait for the first one.
    let residentBefore: string[] = [];
    for (let i = 0; i < 100 && residentBefore.length === 0; i++) {
      residentBefore = (await state.getCluster({})).workers.flatMap((w) => w.models.map((m) => m.model));
      if (residentBefore.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(residentBefore, ["shoal-tiny-embed"], "only the tiny model is loaded at start");
    const order: string[] = [];
    const slowCall = inference.embed({ model: slow, inputs: [TEXTS[0]!] }, { timeoutMs: 30_000 }).then(() => order.push("slow"));
    await new Promise((r) => setTimeout(r, 50)); // the slow model's job is pulled and its load begins
    const fast = Array.from({ length: 5 }, (_, i) =>
      inference.embed({ model: "shoal-tiny-embed", inputs: [TEXTS[i]!] }, { timeoutMs: 30_000 }).then(() => order.push(`tiny${i}`)),
    );
    await Promise.all([slowCall, ...fast]);
    // The worker publishes the load within ~100 ms; the gateway reads it soon after.
    let loaded: GetClusterResponse["workers"][number]["models"][number] | undefined;
    for (let i = 0; i < 50 && !(loaded && loaded.lastColdStartMs > 0); i++) {
      loaded = (await state.getCluster({})).workers[0]?.models.find((m) => m.model === slow && m.state === ResidencyState.RESIDENT);
      if (!(loaded && loaded.lastColdStartMs > 0)) await new Promise((r) => setTimeout(r, 100));
    }
    console.log(`answer order: ${order.join(" ")}; ${slow} cold start ${loaded?.lastColdStartMs.toFixed(0)} ms`);
    assert.equal(order.at(-1), "slow", `every tiny-model job was answered before the load finished: ${order.join(" ")}`);
    assert.ok(loaded && loaded.lastColdStartMs > 0, "the cold start is recorded");
  });
});
