/**
 * The share intake's keep rule for a busy worker's look-ahead, on a real broker: a worker holding
 * one model's job, with room left (a take-ahead), waits on the other models' queues too. A job
 * such a wait brings is kept when the intake has no way to tell when it would start it
 * (`keepsHere` unset), and asked about when it has: a job it would not start within a round trip
 * goes back to the group for an idle worker.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { createLogger } from "@shoal/common";
import type { Delivery } from "@shoal/worker/intake/intake";
import { createShareIntake } from "@shoal/worker/intake/share-intake";
import { until } from "./harness/wait.ts";
import { brokers, createTopic, disconnectProducer, produce, unique } from "./kafka-share/helpers.ts";

const logger = createLogger("share-intake-keep-test", "error");

/**
 * One worker on a two-model pool takes a job of model a, then (its waits begun idle long over) a job
 * of model b arrives. Returns how b's job reached the worker and what was given back on the way.
 */
async function lookAheadTake(keepsHere?: () => boolean): Promise<{ deliveryCount: number; gaveBack: string[] }> {
  const [a, b] = [unique("jobs-a"), unique("jobs-b")];
  await Promise.all([createTopic(a), createTopic(b)]);
  const got: Delivery[] = [];
  const gaveBack: string[] = [];
  const intake = createShareIntake({
    brokers,
    groupId: unique("keep"),
    clientId: unique("w"),
    topics: [
      { topic: a, lane: "interactive", model: "a" },
      { topic: b, lane: "interactive", model: "b" },
    ],
    lockMs: 15_000,
    deliveryLimit: 5,
    idleWaitMs: 100,
    onGiveBack: (why) => gaveBack.push(why),
    ...(keepsHere ? { keepsHere } : {}),
    logger,
  });
  // Room for four whatever it holds: a busy worker whose take-ahead is open.
  await intake.start({
    deliver: (d) => void got.push(d),
    room: () => 4 - got.length,
    holds: (model) => got.some((d) => d.topic === (model === "a" ? a : b)),
  });
  try {
    await produce(a, 1);
    await until("model a's job", () => got.length === 1);
    // The waits sent while it held nothing end within 1.5 × 100 ms; those after are a busy worker's.
    await new Promise((r) => setTimeout(r, 500));
    await produce(b, 1);
    await until("model b's job", () => got.length === 2);
    assert.equal(got[1]!.topic, b);
    return { deliveryCount: got[1]!.deliveryCount, gaveBack };
  } finally {
    for (const d of got) d.settle("done");
    await intake.stop();
  }
}

describe("share intake: what a busy worker's look-ahead keeps (real broker)", () => {
  after(() => disconnectProducer());

  test("keepsHere unset: the look-ahead keeps the other model's job it asked for", async () => {
    assert.deepEqual(await lookAheadTake(), { deliveryCount: 1, gaveBack: [] });
  });

  test("keepsHere says this worker starts it within a round trip: kept", async () => {
    assert.deepEqual(await lookAheadTake(() => true), { deliveryCount: 1, gaveBack: [] });
  });

  test("keepsHere says it would wait: given back for an idle worker (here none: this worker's next wait takes it again, kept on its second delivery)", async () => {
    assert.deepEqual(await lookAheadTake(() => false), { deliveryCount: 2, gaveBack: ["busy"] });
  });
});
