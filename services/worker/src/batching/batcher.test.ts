import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Batcher, type BatchItem, type CloseReason } from "./batcher.ts";
import { ManualClock } from "./manual-clock.ts";

interface Item extends BatchItem {
  readonly name: string;
}

function setup(opts: Partial<{ maxBatchTokens: number; maxBatchItems: number; maxWaitMs: number; concurrency: number }> = {}) {
  const clock = new ManualClock();
  const batches: { names: string[]; reason: CloseReason; finish: () => void }[] = [];
  const batcher = new Batcher<Item>(
    { maxBatchTokens: 100, maxBatchItems: 8, maxWaitMs: 5, concurrency: 1, ...opts },
    clock,
    (items, reason) =>
      new Promise<void>((resolve) => batches.push({ names: items.map((i) => i.name), reason, finish: resolve })),
  );
  const push = (name: string, tokens: number): void => batcher.push({ name, tokens, enqueuedAtMs: clock.now() });
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
    assert.deepEqual(batches.map((b) => b.names), [["a", "b", "c"]]);
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
    assert.deepEqual(batches.map((b) => [b.names, b.reason]), [[["a", "b"], "max-wait"]]);
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
    const batcher = new Batcher<Item>({ maxBatchTokens: 100, maxBatchItems: 1, maxWaitMs: 0, concurrency: 1 }, clock, async (items) => {
      seen.push(items.map((i) => i.name));
      throw new Error("boom");
    });
    batcher.push({ name: "a", tokens: 1, enqueuedAtMs: 0 });
    batcher.push({ name: "b", tokens: 1, enqueuedAtMs: 0 });
    await tick();
    await tick();
    assert.deepEqual(seen, [["a"], ["b"]]);
  });
});
