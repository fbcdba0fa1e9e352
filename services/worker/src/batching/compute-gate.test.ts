import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ComputeGate } from "./compute-gate.ts";

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("compute gate", () => {
  test("at most `slots` runs at once; a release starts the next", async () => {
    const gate = new ComputeGate(1);
    const started: string[] = [];
    const releases: Array<() => void> = [];
    for (const name of ["a1", "a2"]) void gate.acquire("a", "batch").then((r) => (started.push(name), releases.push(r)));
    await tick();
    assert.deepEqual(started, ["a1"]);
    releases[0]!();
    releases[0]!(); // idempotent
    await tick();
    assert.deepEqual(started, ["a1", "a2"]);
    assert.deepEqual(gate.stats, { running: 1, waiting: 0 });
  });

  test("waiting runs are served round-robin across models, FIFO within a model", async () => {
    const gate = new ComputeGate(1);
    const order: string[] = [];
    const first = await gate.acquire("hot", "batch");
    const all: Promise<void>[] = [];
    // The hot model queues five runs before the other models' runs arrive.
    for (let i = 1; i <= 5; i++) all.push(gate.acquire("hot", "batch").then((r) => (order.push(`hot${i}`), r())));
    all.push(gate.acquire("cold", "batch").then((r) => (order.push("cold1"), r())));
    all.push(gate.acquire("other", "batch").then((r) => (order.push("other1"), r())));
    first();
    await Promise.all(all);
    assert.deepEqual(order.slice(0, 3), ["hot1", "cold1", "other1"], `every model got a turn within the first three runs: ${order}`);
    assert.deepEqual(order.filter((o) => o.startsWith("hot")), ["hot1", "hot2", "hot3", "hot4", "hot5"]);
  });

  test("an interactive run goes before every waiting batch-lane run, of any model", async () => {
    const gate = new ComputeGate(1);
    const order: string[] = [];
    const running = await gate.acquire("m", "batch");
    const all = [
      gate.acquire("m", "batch").then((r) => (order.push("m-batch"), r())),
      gate.acquire("n", "batch").then((r) => (order.push("n-batch"), r())),
      gate.acquire("n", "interactive").then((r) => (order.push("n-interactive"), r())),
      gate.acquire("m", "interactive").then((r) => (order.push("m-interactive"), r())),
    ];
    await tick();
    assert.deepEqual(gate.stats, { running: 1, waiting: 4 });
    running();
    await Promise.all(all);
    assert.deepEqual(order, ["n-interactive", "m-interactive", "m-batch", "n-batch"]);
  });
});
