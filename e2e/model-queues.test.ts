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
  /** Times the queue handed the job to a worker (the `shoal-deliveries` header). */
  readonly deliveries: number;
}

/** One gRPC client (one HTTP/2 connection) per gateway, as a service calling Shoal would hold. */
const clients = new Map<string, ReturnType<typeof clientsFor>>();

async function embed(cluster: TestCluster, model: string, text: string, lane = Lane.INTERACTIVE): Promise<Outcome> {
  const url = cluster.urls[0]!;
  if (!clients.has(url)) clients.set(url, clientsFor(url, "grpc"));
  const { inference } = clients.get(url)!;
  let worker = "";
  let deliveries = 0;
  const onHeader = (h: Headers): void => {
    worker = h.get("shoal-worker") ?? "";
    deliveries = Number(h.get("shoal-deliveries") ?? 0);
  };
  try {
    const res = await inference.embed({ model, inputs: [text], lane }, { timeoutMs: 90_000, onHeader });
    return { model, worker, code: "OK", values: res.embeddings[0]!.values, deliveries };
  } catch (err) {
    return { model, worker, code: Code[ConnectError.from(err).code] ?? "?", values: [], deliveries };
  }
}

const MODELS = ["m-alpha", "m-beta", "m-gamma"];
const text = (i: number): string => `model queue ${i % 7} ${"the tide brings the shoal back to the reef ".repeat(2)}`;

/**
 * Three workers on simulated devices (a job computes for ~50 ms) sharing a queue per model of
 * MODELS, with `env` added to theirs.
 */
function simulatedPool(dir: string, env: Record<string, string>): Parameters<typeof startCluster>[0] {
  return {
    workers: 3,
    presets: [],
    entries: MODELS.map((id) => ({ dir, fields: { id } })),
    intake: "share",
    jobTopics: "per-model",
    workerEnv: { SHOAL_RUNTIME: "simulated:gpu-a100-bert", SHOAL_SIM_DILATION: "100", SHOAL_SIM_LOAD_MS: "1", SHOAL_INFERENCE_THREADS: "1", ...env },
  };
}

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

  test("give-backs (SHOAL_SHARE_WAKE, _GIVE_BACK_REST_MS, _GIVE_BACKS=2): fan-outs that land on one busy worker are handed on and answered, never dead-lettered", async () => {
    // Simulated devices, so a job computes for ~50 ms: a worker that took one call of a fan-out is
    // still busy when the others reach its waiting fetches, and gives them back.
    const dir = await ensureModel("mini");
    const cluster = await startCluster(simulatedPool(dir, { SHOAL_SHARE_WAKE: "1", SHOAL_SHARE_GIVE_BACK_REST_MS: "50", SHOAL_SHARE_GIVE_BACKS: "2" }));
    cleanup.push(() => cluster.stop());
    const outcomes: Outcome[] = [];
    // Fan-outs of the three models at once, from idle workers, until some job was handed on twice.
    for (let round = 0; round < 30; round++) {
      outcomes.push(...(await Promise.all(MODELS.map((m, i) => embed(cluster, m, text(round * 3 + i))))));
      if (round >= 9 && outcomes.some((o) => o.deliveries >= 3)) break;
      await new Promise((r) => setTimeout(r, 150));
    }
    const counts = outcomes.map((o) => o.deliveries);
    console.log(`deliveries per call: ${JSON.stringify(Object.fromEntries([1, 2, 3].map((n) => [n, counts.filter((c) => c === n).length])))}`);
    assert.deepEqual(
      outcomes.filter((o) => o.code !== "OK").map((o) => o.code),
      [],
    );
    // A job given back twice runs on its third delivery: never more (the limit is 5, and the
    // lifecycle dead-letters at 4), never fewer than one.
    assert.ok(
      counts.every((c) => c >= 1 && c <= 3),
      `deliveries within 1-3: ${counts.join(",")}`,
    );
    assert.ok(
      counts.some((c) => c >= 2),
      "some call of a fan-out was given back and answered by the next worker",
    );
    assert.ok(new Set(outcomes.map((o) => o.worker)).size === 3, "every worker answered");
  });

  test("SHOAL_TAKE_AHEAD_MS=auto: a job this worker starts within its measured take round trip is kept, not given back", async () => {
    // A simulated network of 300 ms after each fetch (SHOAL_SIM_FETCH_DELAY_MS) against ~50 ms of
    // compute: once a worker has measured its round trip, any job it would give back it starts sooner
    // itself, so it keeps it. Without the rule (SHOAL_SHARE_KEEP_WITHIN_TRIP=0) fan-outs are given back.
    const dir = await ensureModel("mini");
    const run = async (keep: boolean): Promise<Outcome[]> => {
      const cluster = await startCluster(
        simulatedPool(dir, { SHOAL_SIM_FETCH_DELAY_MS: "300", SHOAL_TAKE_AHEAD_MS: "auto", SHOAL_SHARE_KEEP_WITHIN_TRIP: keep ? "1" : "0" }),
      );
      try {
        // Warm-up: each worker measures its fetches (4 needed) and learns its compute cost.
        for (let round = 0; round < 8; round++) await Promise.all(MODELS.map((m, i) => embed(cluster, m, text(round * 3 + i))));
        const outcomes: Outcome[] = [];
        for (let round = 0; round < 12; round++) {
          outcomes.push(...(await Promise.all(MODELS.map((m, i) => embed(cluster, m, text(100 + round * 3 + i))))));
          await new Promise((r) => setTimeout(r, 100));
        }
        return outcomes;
      } finally {
        await cluster.stop();
      }
    };
    const kept = await run(true);
    const handedOn = await run(false);
    const deliveries = (os: Outcome[]): string => JSON.stringify(Object.fromEntries([1, 2, 3].map((n) => [n, os.filter((o) => o.deliveries === n).length])));
    console.log(`deliveries per call after the warm-up: kept within the round trip ${deliveries(kept)}, rule off ${deliveries(handedOn)}`);
    for (const os of [kept, handedOn])
      assert.deepEqual(
        os.filter((o) => o.code !== "OK").map((o) => o.code),
        [],
      );
    assert.ok(
      kept.every((o) => o.deliveries === 1),
      `with the rule every call ran on its first delivery: ${kept.map((o) => o.deliveries).join(",")}`,
    );
    assert.ok(
      handedOn.some((o) => o.deliveries >= 2),
      "without it some call of a fan-out was given back (the case the rule changes)",
    );
  });
});
