import assert from "node:assert/strict";
import { test } from "node:test";
import { CooperativeQueue } from "./cooperative-queue.ts";

/** A fake clock each step advances by `stepMs`, and a log of what ran in which order. */
function harness(stepMs: number): { queue: CooperativeQueue; log: string[]; yields: () => number } {
  let t = 0;
  let yields = 0;
  const log: string[] = [];
  const queue = new CooperativeQueue(
    1,
    () => {
      yields += 1;
      log.push("yield");
      return new Promise((r) => setImmediate(r));
    },
    () => (t += stepMs),
  );
  return { queue, log, yields: () => yields };
}

function* steps(name: string, n: number, log: string[]): Generator<void, string, void> {
  for (let i = 0; i < n; i++) {
    log.push(`${name}${i}`);
    yield;
  }
  return `${name} done`;
}

test("long work gives the event loop back every slice: a callback queued meanwhile runs between steps", async () => {
  const { queue, log } = harness(0.6);
  const done = queue.run(() => steps("a", 6, log));
  setImmediate(() => log.push("interactive"));
  assert.equal(await done, "a done");
  const first = log.indexOf("a0");
  const interactive = log.indexOf("interactive");
  assert.ok(interactive >= 0 && interactive < log.indexOf("a5"), `the callback ran before the work ended: ${log.join(" ")}`);
  assert.ok(first >= 0);
  // 0.6 ms per step on a 1 ms slice: the loop is given back at least every second step.
  const between = log.slice(first).filter((l) => l === "yield").length;
  assert.ok(between >= 2, `yields inside the work: ${log.join(" ")}`);
});

test("short work runs its steps without yielding inside a slice", async () => {
  const { queue, log } = harness(0.01);
  assert.equal(await queue.run(() => steps("s", 20, log)), "s done");
  assert.equal(log.filter((l) => l === "yield").length, 1, "only the yield before the piece starts");
});

test("one piece per slice; the piece that has run least goes next, so long pieces take turns", async () => {
  const { queue, log } = harness(0.6);
  const results = await Promise.all([queue.run(() => steps("a", 3, log)), queue.run(() => steps("b", 3, log)), queue.run(() => steps("c", 2, log))]);
  assert.deepEqual(results, ["a done", "b done", "c done"]);
  const order = log.filter((l) => l !== "yield");
  assert.deepEqual(order, ["a0", "a1", "b0", "b1", "c0", "c1", "a2", "b2"]);
});

test("a one-step piece queued behind a long one runs at the next slice, not after it (issue #52)", async () => {
  const { queue, log } = harness(0.6);
  const long = queue.run(() => steps("long", 40, log));
  // Queued once the long piece has started (its first slice ran).
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  const short = queue.run(() => steps("short", 1, log));
  await Promise.all([long, short]);
  const order = log.filter((l) => l !== "yield");
  assert.ok(order.indexOf("short0") <= 4, `the short piece waited at most two slices: ${order.join(" ")}`);
});

test("a piece that throws rejects its own promise; the queue goes on; idle waits for everything", async () => {
  const { queue, log } = harness(0.6);
  const failing = queue.run(function* (): Generator<void, string, void> {
    yield;
    throw new Error("tokenizer exploded");
  });
  const after = queue.run(() => steps("z", 2, log));
  assert.equal(queue.pending, 2);
  const idle = queue.idle();
  await assert.rejects(failing, /tokenizer exploded/);
  assert.equal(await after, "z done");
  await idle;
  assert.equal(queue.pending, 0);
  await queue.idle();
});
