/**
 * A per-model pool (`jobTopics: per-model`) on the real stack: each model's jobs have a topic of
 * their own per lane, every worker takes jobs of every model (one share-group member per topic, so
 * Kafka's assignor cannot pin a model to one worker), and workers that join, leave or die lose
 * nothing.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { modelJobsTopic, SERVED_LANES } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { Kafka, logLevel } from "kafkajs";
import { ensureModel } from "@shoal/models";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff } from "./harness/clients.ts";

interface Outcome {
  readonly model: string;
  readonly worker: string;
  readonly code: string;
  readonly values: number[];
}

/** One gRPC client (one HTTP/2 connection) per gateway, as a service calling Shoal would hold. */
const clients = new Map<string, ReturnType<typeof clientsFor>>();

async function embed(cluster: TestCluster, model: string, text: string, lane = Lane.INTERACTIVE): Promise<Outcome> {
  const url = cluster.urls[0]!;
  if (!clients.has(url)) clients.set(url, clientsFor(url, "grpc"));
  const { inference } = clients.get(url)!;
  let worker = "";
  try {
    const res = await inference.embed({ model, inputs: [text], lane }, { timeoutMs: 90_000, onHeader: (h) => (worker = h.get("shoal-worker") ?? "") });
    return { model, worker, code: "OK", values: res.embeddings[0]!.values };
  } catch (err) {
    return { model, worker, code: Code[ConnectError.from(err).code] ?? "?", values: [] };
  }
}

const MODELS = ["m-alpha", "m-beta", "m-gamma"];
const text = (i: number): string => `model queue ${i % 7} ${"the tide brings the shoal back to the reef ".repeat(2)}`;

async function perModelCluster(workers: number): Promise<TestCluster> {
  const dir = await ensureModel("mini");
  return startCluster({
    workers,
    presets: [],
    entries: MODELS.map((id) => ({ dir, fields: { id } })),
    intake: "share",
    jobTopics: "per-model",
    workerEnv: { SHOAL_PREFETCH_TOKENS: "64", SHOAL_IDLE_TAKE_TOKENS: "256" },
  });
}

describe("per-model jobs topics: a shared queue per model", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c();
  });

  test("each model has its own topic per lane; a burst of three models is spread over every worker through shared queues and answered right, on both lanes", async () => {
    const cluster = await perModelCluster(3);
    cleanup.push(() => cluster.stop());
    const kafka = new Kafka({ clientId: "model-queues-test", brokers: kafkaBrokers().split(","), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    const topics = new Set(await admin.listTopics());
    await admin.disconnect();
    for (const m of MODELS)
      for (const lane of SERVED_LANES) assert.ok(topics.has(modelJobsTopic(cluster.pool, lane, m)), `${modelJobsTopic(cluster.pool, lane, m)} exists`);
    // Reference vectors from lone calls (the three ids serve the same model files).
    const reference = new Map<number, number[]>();
    const lone: number[] = [];
    for (let i = 0; i < 7; i++) {
      const t = performance.now();
      reference.set(i, (await embed(cluster, MODELS[i % 3]!, text(i))).values);
      lone.push(Math.round(performance.now() - t));
    }
    console.log(`lone calls (ms): ${lone.join(", ")}`);
    // Shared queues, not a static model → worker map: every worker answered, and some model's jobs
    // went to more than one worker. Not every model's: a worker that holds a model takes that
    // model's waiting jobs for its batch, and one model per worker is a fine outcome of a burst of
    // three models on three workers (1 of 5 runs had one model on a single worker; once in CI,
    // 2026-12-05, all three). So up to three bursts, until some model has been answered by two
    // workers: under a static map (routed, or a consumer group's partitions) that never happens.
    const workersOf = new Map(MODELS.map((m) => [m, new Set<string>()]));
    const answeredBy = new Set<string>();
    for (let burst = 1; burst <= 3; burst++) {
      const t0 = performance.now();
      const outcomes = await Promise.all(Array.from({ length: 90 }, (_, i) => embed(cluster, MODELS[i % 3]!, text(i))));
      assert.deepEqual(
        outcomes.filter((o) => o.code !== "OK").map((o) => o.code),
        [],
      );
      for (const [i, o] of outcomes.entries()) assert.ok(maxAbsDiff(o.values, reference.get(i % 7)!) < 1e-5, `answer ${i} is its text's vector`);
      for (const o of outcomes) {
        workersOf.get(o.model)!.add(o.worker);
        answeredBy.add(o.worker);
      }
      console.log(
        `burst ${burst} of 90 answered in ${Math.round(performance.now() - t0)} ms; workers per model so far: ${JSON.stringify(Object.fromEntries([...workersOf].map(([m, w]) => [m, w.size])))}`,
      );
      if (answeredBy.size === 3 && [...workersOf.values()].some((w) => w.size >= 2)) break;
    }
    assert.equal(answeredBy.size, 3, "every worker answered part of the bursts");
    assert.ok(
      [...workersOf.values()].some((w) => w.size >= 2),
      "some model's jobs went to more than one worker: the queues are shared, not routed",
    );
    // The batch lane has its own topic per model, read in the background of the interactive ones.
    const batch = await Promise.all(Array.from({ length: 12 }, (_, i) => embed(cluster, MODELS[i % 3]!, text(i), Lane.BATCH)));
    assert.deepEqual(
      batch.map((o) => o.code),
      Array.from({ length: 12 }, () => "OK"),
    );
    for (const [i, o] of batch.entries()) assert.ok(maxAbsDiff(o.values, reference.get(i % 7)!) < 1e-5, `batch-lane answer ${i} is its text's vector`);
  });

  test("workers joining, leaving (SIGTERM) and dying (SIGKILL) under load of three models: every request answered", async () => {
    const cluster = await perModelCluster(2);
    cleanup.push(() => cluster.stop());
    let next = 0;
    const outcomes: Outcome[] = [];
    const events: Promise<unknown>[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 360) {
          const i = next++;
          if (i === 60) events.push(cluster.startWorker());
          if (i === 150) events.push(cluster.workers[0]!.stop("SIGTERM"));
          if (i === 240) events.push(cluster.workers[1]!.stop("SIGKILL"));
          outcomes.push(await embed(cluster, MODELS[i % 3]!, text(i)));
        }
      }),
    );
    await Promise.all(events);
    assert.deepEqual(
      outcomes.filter((o) => o.code !== "OK").map((o) => o.code),
      [],
    );
    assert.ok(new Set(outcomes.map((o) => o.worker)).size >= 3, "the joining worker answered too");
  });
});
