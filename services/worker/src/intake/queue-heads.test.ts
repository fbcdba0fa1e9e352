import assert from "node:assert/strict";
import { test } from "node:test";
import type { QueueHead } from "@shoal/kafka-share";
import { QueueHeads } from "./queue-heads.ts";

/** A view whose reads answer what `next` holds at the time, counted. */
function heads(maxAgeMs = 1_000) {
  let next = new Map<string, QueueHead>();
  let reads = 0;
  const view = new QueueHeads<string>({
    read: () => {
      reads++;
      return Promise.resolve(next);
    },
    maxAgeMs,
    wanted: () => false,
    onError: (err) => assert.fail(String(err)),
  });
  return {
    view,
    set: (m: Record<string, QueueHead>) => (next = new Map(Object.entries(m))),
    reads: () => reads,
    /** Reads now and lets the read land. */
    async read(now: number) {
      view.refresh(now);
      await new Promise((r) => setImmediate(r));
    },
  };
}

test("without a view: the rotation as given; with one: oldest head first, unknown ages next, empty last (rotation within a tier)", async () => {
  const h = heads();
  assert.deepEqual(h.view.order(["a", "b", "c", "d"]), ["a", "b", "c", "d"]);
  h.set({ a: { waiting: 0 }, b: { waiting: 2, oldestMs: 500 }, c: { waiting: 1 }, d: { waiting: 4, oldestMs: 100 } });
  await h.read(10_000);
  assert.deepEqual(h.view.order(["a", "b", "c", "d"]), ["d", "b", "c", "a"]);
  assert.deepEqual(h.view.order(["c", "a", "d", "b"]), ["d", "b", "c", "a"]);
});

test("reads at most once per maxAgeMs, never two at once", async () => {
  const h = heads(50);
  h.view.refresh(1_000);
  h.view.refresh(1_001); // one out already
  await new Promise((r) => setImmediate(r));
  assert.equal(h.reads(), 1);
  h.view.refresh(1_040); // fresh
  assert.equal(h.reads(), 1);
  await h.read(1_051);
  assert.equal(h.reads(), 2);
});

test("a queue found empty goes last while reads show the same head (held elsewhere), to the middle when more wait, back in age order with a new head", async () => {
  const h = heads(0);
  h.set({ a: { waiting: 3, oldestMs: 100 }, b: { waiting: 1, oldestMs: 200 } });
  await h.read(1);
  assert.deepEqual(h.view.order(["a", "b"]), ["a", "b"]);
  h.view.taken("a", 0); // a's 3 are held by other workers
  assert.deepEqual(h.view.order(["a", "b"]), ["b", "a"]);
  await h.read(2); // the same head and count: still held
  assert.deepEqual(h.view.order(["a", "b"]), ["b", "a"]);
  h.set({ a: { waiting: 4, oldestMs: 100 }, b: { waiting: 1, oldestMs: 200 } });
  await h.read(3); // one more behind the held ones: its age is unknown
  assert.deepEqual(h.view.order(["a", "b", "c"]), ["b", "a", "c"]);
  h.set({ a: { waiting: 1, oldestMs: 150 }, b: { waiting: 1, oldestMs: 200 }, c: { waiting: 0 } });
  await h.read(4); // the held ones are done: a's head moved on
  assert.deepEqual(h.view.order(["c", "b", "a"]), ["a", "b", "c"]);
});

test("a queue this worker took from: jobs beyond the ones it took count, the ones it holds do not", async () => {
  const h = heads(0);
  h.set({ a: { waiting: 5, oldestMs: 100 }, b: { waiting: 1, oldestMs: 200 } });
  await h.read(1);
  h.view.taken("a", 5); // took all five
  assert.deepEqual(h.view.order(["a", "b"]), ["b", "a"]);
  h.view.taken("b", 0);
  h.set({ a: { waiting: 8, oldestMs: 100 }, b: { waiting: 1, oldestMs: 200 } });
  await h.read(2); // three more arrived behind a's five
  assert.deepEqual(h.view.order(["b", "a"]), ["a", "b"]);
});
