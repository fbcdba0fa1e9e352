import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { LaneName } from "@shoal/common";
import { Batcher, defaultBatcherOptions, type BatcherOptions, type BatchItem, type CloseReason, takingTurns } from "./batcher.ts";
import { ComputeGate } from "./compute-gate.ts";
import { ManualClock } from "./manual-clock.ts";

interface Item extends BatchItem {
  readonly name: string;
}

function setup(opts: Partial<BatcherOptions> = {}) {
  const clock = new ManualClock();
  const batches: { names: string[]; reason: CloseReason; finish: () => void }[] = [];
  const batcher = new Batcher<Item>(
    { ...defaultBatcherOptions, maxBatchTokens: 100, maxBatchItems: 8, maxWaitMs: 5, concurrency: 1, ...opts },
    clock,
    (items, reason) => new Promise<void>((resolve) => batches.push({ names: items.map((i) => i.name), reason, finish: resolve })),
  );
  const push = (name: string, tokens: number, lane: LaneName = "interactive", deadlineMs = Infinity): void =>
    batcher.push({ name, tokens, enqueuedAtMs: clock.now(), lane, deadlineMs });
  return { clock, batches, batcher, push };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe("Batcher (injected clock)", () => {
  test("with max-wait 0, items pushed in one synchronous run go together", async () => {
    const { batches, push } = setup({ maxWaitMs: 0 });
    push("a", 10);
    push("b", 10);
    push("c", 10);
    assert.equal(batches.length, 0, "decided after the synchronous run");
    await Promise.resolve();
    assert.deepEqual(
      batches.map((b) => b.names),
      [["a", "b", "c"]],
    );
  });

  test("a lone item waits max-wait for company, then runs", async () => {
    const { clock, batches, push } = setup();
    push("a", 10);
    await tick();
    clock.advance(4);
    assert.equal(batches.length, 0);
    push("b", 10);
    await tick();
    clock.advance(1);
    assert.deepEqual(
      batches.map((b) => [b.names, b.reason]),
      [[["a", "b"], "max-wait"]],
    );
  });

  test("closes at once when the token budget is reached, without waiting", () => {
    const { batches, push } = setup({ maxBatchTokens: 100 });
    push("a", 60);
    assert.equal(batches.length, 0);
    push("b", 50); // 110 pending >= 100
    assert.equal(batches.length, 1);
    assert.deepEqual(batches[0]!.names, ["a"], "takes items up to the budget, the rest waits");
    assert.equal(batches[0]!.reason, "full");
  });

  test("closes at once at max items; keeps arrival order", () => {
    const { batches, push } = setup({ maxBatchItems: 3 });
    for (const n of ["a", "b", "c"]) push(n, 1);
    assert.deepEqual(batches[0]!.names, ["a", "b", "c"]);
  });

  test("an item larger than the budget still runs, alone", () => {
    const { batches, push } = setup({ maxBatchTokens: 100 });
    push("huge", 500);
    assert.deepEqual(batches[0]!.names, ["huge"]);
  });

  test("what arrives during a forward pass runs next without waiting again (continuous drain)", async () => {
    const { clock, batches, push } = setup();
    push("a", 10);
    await tick();
    clock.advance(5);
    assert.equal(batches.length, 1);
    push("b", 10);
    push("c", 10);
    await tick();
    clock.advance(2); // inside the forward pass; max-wait not reached for b, c
    batches[0]!.finish();
    await tick();
    assert.equal(batches.length, 2);
    assert.deepEqual(batches[1]!.names, ["b", "c"]);
    assert.equal(batches[1]!.reason, "drain");
  });

  test("never runs more batches at once than its concurrency", async () => {
    const { clock, batches, push, batcher } = setup({ maxBatchItems: 1, concurrency: 2 });
    for (const n of ["a", "b", "c", "d"]) push(n, 1);
    clock.advance(10);
    assert.equal(batches.length, 2);
    assert.equal(batcher.size.items, 2);
    batches[0]!.finish();
    await tick();
    assert.equal(batches.length, 3);
  });

  test("idle() resolves when nothing is pending or running", async () => {
    const { clock, batches, push, batcher } = setup();
    push("a", 1);
    let idle = false;
    void batcher.idle().then(() => (idle = true));
    clock.advance(5);
    await tick();
    assert.equal(idle, false);
    batches[0]!.finish();
    await tick();
    await tick();
    assert.equal(idle, true);
  });

  test("a failing run does not stall the batcher", async () => {
    const clock = new ManualClock();
    const seen: string[][] = [];
    const opts = { ...defaultBatcherOptions, maxBatchTokens: 100, maxBatchItems: 1, maxWaitMs: 0 };
    const batcher = new Batcher<Item>(opts, clock, async (items) => {
      seen.push(items.map((i) => i.name));
      throw new Error("boom");
    });
    batcher.push({ name: "a", tokens: 1, enqueuedAtMs: 0, lane: "interactive", deadlineMs: Infinity });
    batcher.push({ name: "b", tokens: 1, enqueuedAtMs: 0, lane: "interactive", deadlineMs: Infinity });
    await tick();
    await tick();
    assert.deepEqual(seen, [["a"], ["b"]]);
  });

  test("interactive first; the batch lane keeps its guaranteed share of every batch", async () => {
    const { clock, batches, batcher } = setup({ maxBatchTokens: 100, maxBatchItems: 100, batchLaneShare: 0.25 });
    const item = (name: string, lane: LaneName): Item => ({ name, tokens: 10, enqueuedAtMs: clock.now(), lane, deadlineMs: Infinity });
    batcher.push(...Array.from({ length: 5 }, (_, i) => item(`b${i}`, "batch")), ...Array.from({ length: 10 }, (_, i) => item(`i${i}`, "interactive")));
    const first = batches[0]!.names;
    assert.equal(first.filter((n) => n.startsWith("i")).length, 7, "interactive fills the budget minus the reserve");
    assert.equal(first.filter((n) => n.startsWith("b")).length, 3, "the batch lane gets the reserved quarter");
    assert.deepEqual(first.slice(0, 7), ["i0", "i1", "i2", "i3", "i4", "i5", "i6"]);
  });

  test("with only the batch lane waiting, it gets the whole budget", async () => {
    const { clock, batches, push } = setup({ maxBatchTokens: 100, maxBatchItems: 100 });
    for (let i = 0; i < 12; i++) push(`b${i}`, 10, "batch");
    await tick();
    clock.advance(5);
    assert.equal(batches[0]!.names.length, 10);
  });

  test("a batch-lane item that waited past the aging limit is served like an interactive one (no starvation)", async () => {
    const { clock, batches, push } = setup({ maxBatchTokens: 100, maxBatchItems: 100, batchLaneShare: 0.1, batchLaneAgingMs: 50 });
    push("old-batch", 40, "batch"); // larger than the 10-token reserve: only aging can serve it
    clock.advance(60);
    for (let i = 0; i < 10; i++) push(`i${i}`, 10, "interactive");
    await tick();
    assert.ok(batches[0]!.names.includes("old-batch"), `aged item served: ${batches[0]!.names.join(",")}`);
  });

  test("closes early when waiting longer would break the tightest deadline (learned run cost)", async () => {
    const { clock, batches, push } = setup({ maxWaitMs: 1_000, maxBatchTokens: 1_000 });
    // Teach the batcher a run cost: 10 tokens took 20 ms -> 2 ms per token.
    push("warm", 10);
    await tick();
    clock.advance(1_000);
    clock.advance(20);
    batches[0]!.finish();
    await tick();
    clock.advance(100); // past the drain window
    push("due", 10, "interactive", clock.now() + 50); // 50 ms left, ~20 ms to run
    await tick();
    clock.advance(29);
    assert.equal(batches.length, 1, "still waiting for company");
    clock.advance(2);
    assert.equal(batches.length, 2);
    assert.equal(batches[1]!.reason, "deadline");
  });

  test("fixed-window: ignores the token budget and the drain, closes on count or wait", async () => {
    const { clock, batches, push } = setup({ policy: "fixed-window", maxBatchTokens: 10, maxBatchItems: 4, maxWaitMs: 5 });
    push("a", 100);
    push("b", 100);
    await tick();
    assert.equal(batches.length, 0, "no token budget close");
    clock.advance(5);
    assert.deepEqual(batches[0]!.names, ["a", "b"]);
    assert.equal(batches[0]!.reason, "max-wait");
    for (const n of ["c", "d", "e", "f"]) push(n, 1);
    batches[0]!.finish();
    await tick();
    assert.deepEqual(batches[1]!.names, ["c", "d", "e", "f"]);
    assert.equal(batches[1]!.reason, "full");
  });

  test("an aged batch-lane backlog does not push interactive work behind it", async () => {
    const { clock, batches, batcher } = setup({ maxBatchTokens: 100, maxBatchItems: 100, batchLaneShare: 0.2, batchLaneAgingMs: 50 });
    const item = (name: string, lane: LaneName, tokens: number): Item => ({ name, tokens, enqueuedAtMs: clock.now(), lane, deadlineMs: Infinity });
    batcher.push(...Array.from({ length: 30 }, (_, i) => item(`b${i}`, "batch", 10)));
    batches[0]!.finish(); // the first batch ran while the rest of the backlog aged
    clock.advance(100);
    batcher.push(item("q1", "interactive", 10), item("q2", "interactive", 10));
    await tick();
    await tick();
    const second = batches[1]!.names;
    assert.deepEqual(second.slice(0, 2), ["q1", "q2"], `interactive first: ${second.join(",")}`);
    assert.equal(second.filter((n) => n.startsWith("b")).length, 8, "the backlog fills the rest, not more");
  });

  test("a slot reserved for the interactive lane: interactive work starts while a batch-lane run is in progress", async () => {
    const { clock, batches, push } = setup({ maxBatchTokens: 100, maxBatchItems: 100, interactiveSlots: 1, maxWaitMs: 0 });
    for (let i = 0; i < 10; i++) push(`b${i}`, 10, "batch");
    await tick();
    assert.equal(batches.length, 1, "the general slot runs the batch lane");
    for (let i = 0; i < 5; i++) push(`b${10 + i}`, 10, "batch");
    await tick();
    clock.advance(10);
    assert.equal(batches.length, 1, "batch-lane work never takes the reserved slot");
    push("q", 10, "interactive");
    await tick();
    assert.equal(batches.length, 2);
    assert.deepEqual(batches[1]!.names, ["q"], "interactive-only batch in the reserved slot");
    push("r", 10, "interactive");
    await tick();
    assert.equal(batches.length, 2, "the reserved slot is one batch deep");
  });

  test("with a compute gate, a batch closes when the gate grants it: items that arrive meanwhile ride along", async () => {
    const clock = new ManualClock();
    const gate = new ComputeGate(1, { clock });
    const runs: { model: string; names: string[]; finish: () => void }[] = [];
    const batcherFor = (model: string) =>
      new Batcher<Item>(
        { ...defaultBatcherOptions, maxBatchTokens: 100, maxBatchItems: 8, maxWaitMs: 0, concurrency: 1 },
        clock,
        (items, _reason, slot) =>
          new Promise<void>((resolve) =>
            runs.push({
              model,
              names: items.map((i) => i.name),
              finish: () => {
                slot?.();
                resolve();
              },
            }),
          ),
        (lane) => gate.acquire(model, lane),
      );
    const a = batcherFor("a");
    const b = batcherFor("b");
    const item = (name: string): Item => ({ name, tokens: 10, enqueuedAtMs: clock.now(), lane: "interactive", deadlineMs: Infinity });
    a.push(item("a1"));
    await tick();
    b.push(item("b1"));
    await tick();
    assert.deepEqual(
      runs.map((r) => r.names),
      [["a1"]],
      "b waits for the device a holds",
    );
    b.push(item("b2"), item("b3"));
    await tick();
    assert.equal(runs.length, 1, "nothing of b is closed while the device is busy");
    runs[0]!.finish();
    await tick();
    assert.deepEqual(
      runs.map((r) => r.names),
      [["a1"], ["b1", "b2", "b3"]],
      "one batch of b, with what arrived during a's run",
    );
    assert.equal(gate.stats.running, 1, "b's run holds the slot it was granted");
    runs[1]!.finish();
    await tick();
    assert.equal(gate.stats.running, 0, "and gives it back");
    await Promise.all([a.idle(), b.idle()]);
  });

  test("with a compute gate, a granted slot is given back when the batch holds nothing by then", async () => {
    const clock = new ManualClock();
    const gate = new ComputeGate(1, { clock });
    let runs = 0;
    const batcher = new Batcher<Item>(
      { ...defaultBatcherOptions, maxWaitMs: 0 },
      clock,
      async (_items, _reason, slot) => {
        runs += 1;
        slot?.(); // the runner found every job of the batch already finished
      },
      (lane) => gate.acquire("m", lane),
    );
    batcher.push({ name: "x", tokens: 10, enqueuedAtMs: clock.now(), lane: "batch", deadlineMs: Infinity });
    await batcher.idle();
    assert.equal(runs, 1);
    assert.deepEqual(gate.stats, { running: 0, waiting: 0 });
  });

  test("with a compute gate, an interactive item does not wait behind a batch-lane batch still waiting for the gate", async () => {
    const clock = new ManualClock();
    // Two threads, one kept for interactive work while it is about.
    const gate = new ComputeGate(2, { clock, interactiveReserve: 1 });
    const runs: { names: string[]; finish: () => void }[] = [];
    const batcher = new Batcher<Item>(
      { ...defaultBatcherOptions, maxBatchTokens: 100, maxBatchItems: 8, maxWaitMs: 0, concurrency: 1, interactiveSlots: 1 },
      clock,
      (items, _reason, slot) =>
        new Promise<void>((resolve) =>
          runs.push({
            names: items.map((i) => i.name),
            finish: () => {
              slot?.();
              resolve();
            },
          }),
        ),
      (lane) => gate.acquire("m", lane),
    );
    // Another model's batch-lane run holds the batch lane's only slot (interactive work is about).
    await gate.acquire("other", "interactive").then((release) => release());
    const otherBatchRun = await gate.acquire("other", "batch");
    const item = (name: string, lane: LaneName): Item => ({ name, tokens: 10, enqueuedAtMs: clock.now(), lane, deadlineMs: Infinity });
    batcher.push(item("b1", "batch"));
    await tick();
    assert.equal(runs.length, 0, "the batch-lane batch waits for the gate");
    batcher.push(item("q1", "interactive"));
    await tick();
    assert.deepEqual(
      runs.map((r) => r.names),
      [["q1"]],
      "the interactive item runs at once, on the reserved thread",
    );
    otherBatchRun();
    await tick();
    assert.deepEqual(
      runs.map((r) => r.names),
      [["q1"], ["b1"]],
    );
    for (const r of runs) r.finish();
    await batcher.idle();
    assert.deepEqual(gate.stats, { running: 0, waiting: 0 });
  });
});

test("takingTurns: a one-text request behind four 256-text requests goes in the next batch (issue #52); without groups the order is the queue's", () => {
  const item = (group: object | undefined, name: string) => ({ name, tokens: 3, enqueuedAtMs: 0, lane: "interactive" as const, deadlineMs: Infinity, group });
  const huge = Array.from({ length: 4 }, () => ({}));
  const queue = [...huge.flatMap((g, j) => Array.from({ length: 256 }, (_, i) => item(g, `h${j}.${i}`))), item({}, "polite")];
  const order = takingTurns(queue).map((i) => i.name);
  assert.deepEqual(order.slice(0, 5), ["h0.0", "h1.0", "h2.0", "h3.0", "polite"]);
  assert.equal(order.length, queue.length);
  const plain = [item(undefined, "a"), item(undefined, "b"), item(undefined, "c")];
  assert.deepEqual(
    takingTurns(plain).map((i) => i.name),
    ["a", "b", "c"],
  );
});
