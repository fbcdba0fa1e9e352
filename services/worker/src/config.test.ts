import assert from "node:assert/strict";
import { availableParallelism } from "node:os";
import { test } from "node:test";
import { ACCELERATOR_IDLE_TAKE_BATCHES, loadWorkerConfig } from "./config.ts";

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

test("runtime: onnx by default, labelled by its provider; simulated:<profile> with a dilation", () => {
  const c = loadWorkerConfig({ ...base });
  assert.deepEqual(c.runtime, { kind: "onnx" });
  assert.equal(c.runtimeLabel, "cpu");
  const sim = loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:cpu-minilm", SHOAL_SIM_DILATION: "10" });
  assert.deepEqual(sim.runtime, { kind: "simulated", profile: "cpu-minilm", dilation: 10 });
  assert.equal(sim.runtimeLabel, "simulated:cpu-minilm");
  assert.equal(loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:gpu-a100-bert" }).runtime.kind, "simulated");
  const quickLoad = loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:gpu-h200-minilm", SHOAL_SIM_DILATION: "20", SHOAL_SIM_LOAD_MS: "50" });
  assert.deepEqual(quickLoad.runtime, { kind: "simulated", profile: "gpu-h200-minilm", dilation: 20, loadMs: 50 });
  const late = loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:gpu-h200-minilm", SHOAL_SIM_FETCH_DELAY_MS: "120" });
  assert.deepEqual(late.runtime, { kind: "simulated", profile: "gpu-h200-minilm", dilation: 1, fetchDelayMs: 120 });
  assert.equal(loadWorkerConfig({ ...base }).takeAheadMs, 0, "take-ahead off by default");
  assert.equal(loadWorkerConfig({ ...base, SHOAL_TAKE_AHEAD_MS: "150" }).takeAheadMs, 150);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_TAKE_AHEAD_MS: "auto" }).takeAheadMs, "auto", "auto: the measured take round trip");
  assert.equal(loadWorkerConfig({ ...base }).shareKeepWithinTrip, true);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_SHARE_KEEP_WITHIN_TRIP: "0" }).shareKeepWithinTrip, false);
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_TAKE_AHEAD_MS: "soon" }), /SHOAL_TAKE_AHEAD_MS=soon: expected an integer/);
});

test("runtime: an unknown profile, a bad dilation and a dilation without simulation are all reported", () => {
  assert.throws(
    () => loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:tpu", SHOAL_SIM_DILATION: "0" }),
    (err: Error) => {
      assert.match(err.message, /SHOAL_RUNTIME=simulated:tpu: expected onnx or simulated:<profile> with a profile of cpu-minilm, gpu-a100-bert/);
      assert.match(err.message, /SHOAL_SIM_DILATION=0: expected a number > 0/);
      return true;
    },
  );
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_SIM_DILATION: "10" }), /only applies with SHOAL_RUNTIME=simulated/);
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_SIM_LOAD_MS: "10" }), /SHOAL_SIM_LOAD_MS: only applies with SHOAL_RUNTIME=simulated/);
  assert.throws(
    () => loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:cpu-minilm", SHOAL_SIM_LOAD_MS: "-1" }),
    /SHOAL_SIM_LOAD_MS=-1: expected a number >= 0/,
  );
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_SIM_FETCH_DELAY_MS: "10" }), /SHOAL_SIM_FETCH_DELAY_MS: only applies with SHOAL_RUNTIME=simulated/);
  assert.throws(
    () => loadWorkerConfig({ ...base, SHOAL_RUNTIME: "simulated:cpu-minilm", SHOAL_SIM_FETCH_DELAY_MS: "2.5" }),
    /SHOAL_SIM_FETCH_DELAY_MS=2.5: expected an integer from 0 to 10000/,
  );
});

test("routed intake: off by default; on, the worker id must be fit to name a topic", () => {
  assert.equal(loadWorkerConfig({ ...base }).routedIntake, false);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_ROUTED_INTAKE: "1", SHOAL_WORKER_ID: "w-1.a_b" }).routedIntake, true);
  assert.throws(
    () => loadWorkerConfig({ ...base, SHOAL_ROUTED_INTAKE: "1", SHOAL_WORKER_ID: "host/7", SHOAL_STATUS_INTERVAL_MS: "10" }),
    /SHOAL_WORKER_ID=host\/7: with SHOAL_ROUTED_INTAKE=1 it names a topic[\s\S]*SHOAL_STATUS_INTERVAL_MS=10: must be >= 20/,
  );
});

test("share acks: held 100 ms by default for one write with others; 0 sends them with the next fetch; a bad value is refused", () => {
  assert.equal(loadWorkerConfig({ ...base }).shareAckLingerMs, 100);
  assert.equal(loadWorkerConfig({ ...base, SHOAL_SHARE_ACK_LINGER_MS: "0" }).shareAckLingerMs, 0);
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_SHARE_ACK_LINGER_MS: "-5" }), /SHOAL_SHARE_ACK_LINGER_MS/);
  assert.throws(() => loadWorkerConfig({ ...base, SHOAL_SHARE_ACK_LINGER_MS: "6000" }), /SHOAL_SHARE_ACK_LINGER_MS/);
});

test("idle take: a batch's worth per thread; four where a call costs more than a full batch (an accelerator); SHOAL_IDLE_TAKE_TOKENS wins", () => {
  const one = { ...base, SHOAL_INFERENCE_THREADS: "1", SHOAL_BATCH_MAX_TOKENS: "2048" };
  assert.equal(loadWorkerConfig(one).idleTakeTokens, 2048);
  assert.equal(loadWorkerConfig({ ...one, SHOAL_INFERENCE_THREADS: "2", SHOAL_INTRA_OP_THREADS: "1" }).idleTakeTokens, 4096);
  assert.equal(loadWorkerConfig({ ...one, SHOAL_PER_CALL_OVERHEAD_TOKENS: "2047" }).idleTakeTokens, 2048);
  assert.equal(loadWorkerConfig({ ...one, SHOAL_PER_CALL_OVERHEAD_TOKENS: "25215" }).idleTakeTokens, ACCELERATOR_IDLE_TAKE_BATCHES * 2048);
  assert.equal(ACCELERATOR_IDLE_TAKE_BATCHES, 4);
  assert.equal(loadWorkerConfig({ ...one, SHOAL_PER_CALL_OVERHEAD_TOKENS: "25215", SHOAL_IDLE_TAKE_TOKENS: "3000" }).idleTakeTokens, 3000);
});
