import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ComputeGate } from "./compute-gate.ts";
import { ManualClock } from "./manual-clock.ts";

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("compute gate", () => {
  test("at most `slots` runs at once; a release starts the next", async () => {
    const gate = new ComputeGate(1);
    const started: string[] = [];
    const releases: Array<() => void> = [];
    for (const name of ["a1", "a2"]) {
      void gate.acquire("a", "batch").then((r) => {
        started.push(name);
        releases.push(r);
      });
    }
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
    for (let i = 1; i <= 5; i++) {
      all.push(
        gate.acquire("hot", "batch").then((r) => {
          order.push(`hot${i}`);
          r();
        }),
      );
    }
    all.push(
      gate.acquire("cold", "batch").then((r) => {
        order.push("cold1");
        r();
      }),
    );
    all.push(
      gate.acquire("other", "batch").then((r) => {
        order.push("other1");
        r();
      }),
    );
    first();
    await Promise.all(all);
    assert.deepEqual(order.slice(0, 3), ["hot1", "cold1", "other1"], `every model got a turn within the first three runs: ${order}`);
    assert.deepEqual(
      order.filter((o) => o.startsWith("hot")),
      ["hot1", "hot2", "hot3", "hot4", "hot5"],
    );
  });

  test("an interactive run goes before every waiting batch-lane run, of any model", async () => {
    const gate = new ComputeGate(1);
    const order: string[] = [];
    const running = await gate.acquire("m", "batch");
    const all = [
      gate.acquire("m", "batch").then((r) => {
        order.push("m-batch");
        r();
      }),
      gate.acquire("n", "batch").then((r) => {
        order.push("n-batch");
        r();
      }),
      gate.acquire("n", "interactive").then((r) => {
        order.push("n-interactive");
        r();
      }),
      gate.acquire("m", "interactive").then((r) => {
        order.push("m-interactive");
        r();
      }),
    ];
    await tick();
    assert.deepEqual(gate.stats, { running: 1, waiting: 4 });
    running();
    await Promise.all(all);
    assert.deepEqual(order, ["n-interactive", "m-interactive", "m-batch", "n-batch"]);
  });

  test("interactive reserve: while interactive work is about, the batch lane leaves a slot free; it takes it back when that lapses", async () => {
    const clock = new ManualClock();
    const gate = new ComputeGate(2, { interactiveReserve: 1, reserveWindowMs: 500, clock });
    const started: string[] = [];
    const take = (name: string, lane: "interactive" | "batch"): Promise<() => void> =>
      gate.acquire("m", lane).then((r) => {
        started.push(name);
        return r;
      });
    // No interactive work yet: the batch lane may use both slots.
    const b1 = await take("b1", "batch");
    const b2 = await take("b2", "batch");
    b2();
    // An interactive run arrives and starts at once on the free slot.
    const i1 = await take("i1", "interactive");
    i1();
    // Within the window the batch lane holds one slot at most: b3 waits though a slot is free.
    const b3 = take("b3", "batch");
    await tick();
    assert.deepEqual(started, ["b1", "b2", "i1"]);
    assert.deepEqual(gate.stats, { running: 1, waiting: 1 });
    // A second interactive run still finds its slot free, with no wait.
    const i2 = await take("i2", "interactive");
    i2();
    clock.advance(499);
    await tick();
    assert.deepEqual(started, ["b1", "b2", "i1", "i2"], "the reservation holds for the window after the last interactive run");
    clock.advance(1);
    (await b3)();
    assert.deepEqual(started, ["b1", "b2", "i1", "i2", "b3"], "the reservation lapsed: the batch lane took the slot back");
    b1();
  });

  test("interactive reserve: the batch lane is never left without a slot, and a release still starts the next batch-lane run", async () => {
    assert.throws(() => new ComputeGate(2, { interactiveReserve: 2 }), /interactiveReserve must be an integer from 0 to slots - 1 = 1/);
    assert.throws(() => new ComputeGate(1, { interactiveReserve: 1 }), /from 0 to slots - 1 = 0/);
    const clock = new ManualClock();
    const gate = new ComputeGate(2, { interactiveReserve: 1, reserveWindowMs: 10_000, clock });
    (await gate.acquire("m", "interactive"))();
    const order: string[] = [];
    const first = await gate.acquire("m", "batch");
    const rest = [1, 2, 3].map((i) =>
      gate.acquire("m", "batch").then((r) => {
        order.push(`b${i}`);
        r();
      }),
    );
    await tick();
    assert.deepEqual(gate.stats, { running: 1, waiting: 3 });
    first();
    await Promise.all(rest);
    assert.deepEqual(order, ["b1", "b2", "b3"], "one at a time, in order, without waiting for the window");
  });
});
