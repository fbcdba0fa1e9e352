import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { test } from "node:test";
import { loadWorkerConfig } from "./config.ts";

const base = { SHOAL_CATALOG: "/etc/shoal/catalog.yaml", KAFKA_BROKERS: "127.0.0.1:9092" };

test("defaults: two inference threads sharing the cores, one kept for interactive work", () => {
  const c = loadWorkerConfig({ ...base });
  const cores = availableParallelism();
  assert.equal(c.inferenceThreads, cores >= 2 ? 2 : 1);
  assert.equal(c.intraOpThreads, Math.max(1, Math.floor(cores / c.inferenceThreads)));
  assert.equal(c.interactiveReserve, c.inferenceThreads - 1);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_INFERENCE_THREADS: "1" }).intraOpThreads, cores, "one thread gets every core");
});

test("one inference thread: no interactive reserve; two or more: one thread kept for interactive work by default", () => {
  assert.equal(loadWorkerConfig({ ...base, SHOAL_INFERENCE_THREADS: "1" }).interactiveReserve, 0);
  const two = loadWorkerConfig({ ...base, SHOAL_INFERENCE_THREADS: "2", SHOAL_INTRA_OP_THREADS: "1" });
  assert.equal(two.inferenceThreads, 2);
  assert.equal(two.interactiveReserve, 1);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_INFERENCE_THREADS: "4", SHOAL_INTERACTIVE_RESERVE: "0" }).interactiveReserve, 0);
});

test("a reserve that would leave the batch lane no thread is refused, with every other problem at once", () => {
  assert.throws(
    () => loadWorkerConfig({ ...base, SHOAL_INFERENCE_THREADS: "2", SHOAL_INTERACTIVE_RESERVE: "2", SHOAL_MEMORY_BUDGET: "lots" }),
    (err: Error) => {
      assert.match(err.message, /SHOAL_INTERACTIVE_RESERVE must be less than SHOAL_INFERENCE_THREADS \(2\)/);
      assert.match(err.message, /SHOAL_MEMORY_BUDGET: expected a size such as 4GiB/);
      return true;
    },
  );
});

test("memory budget and residency policy are read from the environment", () => {
  const c = loadWorkerConfig({ ...base, SHOAL_MEMORY_BUDGET: "1.5GiB", SHOAL_RESIDENCY_POLICY: "lru" });
  assert.equal(c.memoryBudgetBytes, 1.5 * 1024 ** 3);
  assert.equal(c.residencyPolicy, "lru");
});
