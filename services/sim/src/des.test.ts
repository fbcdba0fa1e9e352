import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { simulate, WORKER_BATCHING } from "./des.ts";
import { directRouter, leastLoaded, partitioned, powerOfTwo, roundRobin, sharedQueue } from "./policies.ts";
import { generateTrace, type Trace, type TraceModel } from "./trace.ts";

const ONE_MODEL: TraceModel = { id: "m", task: "embed", maxTokens: 512, medianTokens: 10, sigma: 0, itemsMin: 1, itemsMax: 1 };

/** A hand-written trace: one single-item job per arrival, all of one model. */
function manualTrace(arrivals: readonly number[], tokens = 10): Trace {
  return {
    models: [ONE_MODEL],
    jobs: arrivals.map((arrivalMs, id) => ({ id, request: id, arrivalMs, model: 0, tokens: [tokens], totalTokens: tokens, burst: false })),
    requests: arrivals.length,
    durationMs: arrivals.at(-1) ?? 0,
    burstMs: 0,
    calmRatePerSecond: 0,
    burstRatePerSecond: 0,
  };
}

const flat10 = { aMs: 10, bMsPerToken: 0, cMsPerToken2: 0 };

describe("discrete-event simulation", () => {
  it("one device, fixed arrivals: exact latencies (FIFO, batches of what waited)", () => {
    const r = simulate({ trace: manualTrace([0, 5, 30]), devices: 1, cost: flat10, policy: sharedQueue() });
    assert.deepEqual([...r.latenciesMs], [10, 15, 10]);
    // Jobs 1 and 2 arrive during job 0's call and run together as one 10 ms call.
    const b = simulate({ trace: manualTrace([0, 1, 2]), devices: 1, cost: flat10, policy: roundRobin() });
    assert.deepEqual([...b.latenciesMs], [10, 19, 18]);
    assert.equal(b.batches, 2);
  });

  it("a mixed fetch takes the oldest jobs of any model and runs them model after model; a queue per model gives each idle device one model", () => {
    // Two jobs of model 0 keep both devices busy until 10 ms; then 0, 1, 0, 1 wait.
    const models = [0, 0, 0, 1, 0, 1];
    const trace: Trace = {
      ...manualTrace([0, 0, 1, 2, 3, 4]),
      models: [ONE_MODEL, { ...ONE_MODEL, id: "n" }],
    };
    const jobs = trace.jobs.map((j, i) => ({ ...j, model: models[i]! }));
    const perModel = simulate({ trace: { ...trace, jobs }, devices: 2, cost: flat10, policy: sharedQueue() });
    assert.deepEqual([...perModel.latenciesMs], [10, 10, 19, 18, 17, 16]);
    const mixed = simulate({ trace: { ...trace, jobs }, devices: 2, cost: flat10, policy: sharedQueue({ mixedTakeTokens: 1_000 }) });
    // One device takes all four (model 0's batch, then model 1's); the other stays idle.
    assert.deepEqual([...mixed.latenciesMs], [10, 10, 19, 28, 17, 26]);
    assert.equal(mixed.batches, perModel.batches);
    // A take of 10 tokens is one job per fetch: the devices share the four again, job by job.
    const small = simulate({ trace: { ...trace, jobs }, devices: 2, cost: flat10, policy: sharedQueue({ mixedTakeTokens: 10 }) });
    assert.deepEqual([...small.latenciesMs], [10, 10, 19, 18, 27, 26]);
    assert.throws(() => sharedQueue({ mixedTakeTokens: 0 }), /mixedTakeTokens/);
  });

  it("statusMs: a router reads what the devices last published; a board read before every job herds onto the device that looked idle", () => {
    // Jobs at 0, 1, 2, 3 ms on two devices: device 1 publishes at 50 ms, device 0 at 0 and 100 ms.
    const trace = manualTrace([0, 1, 2, 3]);
    const r0 = leastLoaded({ refreshMs: 0, countOwnSends: true, ties: "first" });
    const fresh = simulate({ trace, devices: 2, cost: flat10, policy: r0 });
    // True loads: the jobs alternate, so both devices run (first batch of one job each).
    assert.deepEqual([...fresh.latenciesMs], [10, 10, 18, 18]);
    const stale = simulate({ trace, devices: 2, cost: flat10, policy: leastLoaded({ refreshMs: 0, countOwnSends: true, ties: "first" }), statusMs: 100 });
    // Both boards read idle (nothing published yet but zeros) and each read clears the own-send
    // counts: every job goes to device 0, and device 1 never runs.
    assert.deepEqual([...stale.latenciesMs], [10, 19, 18, 17]);
    assert.equal(stale.busyFraction[1], 0);
    // Own sends kept until a status measured after them: the board sees its own jobs, and they alternate again.
    const kept = simulate({
      trace,
      devices: 2,
      cost: flat10,
      policy: leastLoaded({ refreshMs: 0, countOwnSends: true, keepOwnSends: true, ties: "first" }),
      statusMs: 100,
    });
    assert.deepEqual([...kept.latenciesMs], [10, 10, 18, 18]);
    // A shared queue reads no board: unchanged.
    const shared = simulate({ trace, devices: 2, cost: flat10, policy: sharedQueue(), statusMs: 100 });
    assert.deepEqual([...shared.latenciesMs], [...simulate({ trace, devices: 2, cost: flat10, policy: sharedQueue() }).latenciesMs]);
    assert.throws(() => simulate({ trace, devices: 1, cost: flat10, policy: sharedQueue(), statusMs: -1 }), /statusMs/);
  });

  it("a rotating shared queue: a device that just finished takes the next model of its own round, not the oldest job's", () => {
    // Model 0 at 0 ms, model 1 at 1 ms, model 0 at 2 ms, one device: at 10 ms the oldest job is model 1's.
    const trace: Trace = { ...manualTrace([0, 1, 2]), models: [ONE_MODEL, { ...ONE_MODEL, id: "n" }] };
    const jobs = trace.jobs.map((j, i) => ({ ...j, model: [0, 1, 0][i]! }));
    const oldest = simulate({ trace: { ...trace, jobs }, devices: 1, cost: flat10, policy: sharedQueue() });
    assert.deepEqual([...oldest.latenciesMs], [10, 19, 28]);
    // The device's round starts at model 0: model 0 again first, and model 1's older job waits.
    const rotation = simulate({ trace: { ...trace, jobs }, devices: 1, cost: flat10, policy: sharedQueue({ order: "rotation" }) });
    assert.deepEqual([...rotation.latenciesMs], [10, 29, 18]);
    assert.throws(() => sharedQueue({ order: "rotation", mixedTakeTokens: 10 }), /rotation/);
  });

  it("a heads order counts a model's running jobs as its head: the broker's head is the oldest record not acknowledged", () => {
    // A (model 0) at 0 ms on device 0, B (model 1) at 1 ms on device 1; D (model 0) waits from 2 ms,
    // C (model 1) from 3 ms. At 10 ms device 0 is free: D is the oldest waiting job, but model 1's
    // head is B, still running on device 1, so a heads order takes C.
    const trace: Trace = { ...manualTrace([0, 1, 2, 3]), models: [ONE_MODEL, { ...ONE_MODEL, id: "n" }] };
    const jobs = trace.jobs.map((j, i) => ({ ...j, model: [0, 1, 0, 1][i]! }));
    const run = (order: "oldest" | "rotation" | "heads"): number[] => [
      ...simulate({ trace: { ...trace, jobs }, devices: 2, cost: flat10, policy: sharedQueue({ order }) }).latenciesMs,
    ];
    assert.deepEqual(run("oldest"), [10, 10, 18, 18]);
    assert.deepEqual(run("rotation"), [10, 10, 18, 18]);
    assert.deepEqual(run("heads"), [10, 10, 19, 17]);
  });

  it("a take of several batches holds the model's jobs on one device, run back to back", () => {
    // One job per batch; model 0 at 0, 1 and 3 ms, model 1 at 2 ms, one device.
    const trace: Trace = { ...manualTrace([0, 1, 2, 3]), models: [ONE_MODEL, { ...ONE_MODEL, id: "n" }] };
    const jobs = trace.jobs.map((j, i) => ({ ...j, model: [0, 0, 1, 0][i]! }));
    const batching = { ...WORKER_BATCHING, maxBatchItems: 1 };
    const run = (takeBatches: number): number[] => [
      ...simulate({ trace: { ...trace, jobs }, devices: 1, cost: flat10, policy: sharedQueue({ takeBatches }), batching }).latenciesMs,
    ];
    // One batch a take: the job at 2 ms (model 1) goes before the one at 3 ms.
    assert.deepEqual(run(1), [10, 19, 28, 37]);
    // Two: at 10 ms the device takes both of model 0's waiting jobs, and model 1's waits for them.
    assert.deepEqual(run(2), [10, 19, 38, 27]);
    assert.equal(sharedQueue({ takeBatches: 2 }).name, "shared queue, 2 batches a take");
    assert.throws(() => sharedQueue({ takeBatches: 0 }), /takeBatches/);
    assert.throws(() => sharedQueue({ takeBatches: 2, mixedTakeTokens: 10 }), /mixedTakeTokens/);
  });

  it("pathMs adds the live path's fixed latency to every answer, not to device time", () => {
    const r = simulate({ trace: manualTrace([0, 5, 30]), devices: 1, cost: flat10, policy: sharedQueue(), pathMs: 7 });
    assert.deepEqual([...r.latenciesMs], [17, 22, 17]);
    assert.equal(r.batches, 3);
    assert.throws(() => simulate({ trace: manualTrace([0]), devices: 1, cost: flat10, policy: sharedQueue(), pathMs: -1 }), /pathMs/);
  });

  it("a board refreshed every 0 ms is read before every job (and the run ends)", () => {
    const trace = manualTrace([0, 1, 2, 3]);
    const fresh = simulate({ trace, devices: 2, cost: flat10, policy: leastLoaded({ refreshMs: 0, countOwnSends: false, ties: "first" }) });
    assert.equal(fresh.answeredFraction, 1);
    // Job 0 starts on device 0, job 1 sees it busy and goes to device 1; job 2 ties (first), job 3 sees job 2 queued on device 0.
    assert.deepEqual([...fresh.latenciesMs], [10, 10, 18, 18]);
  });

  it("costs a + b·B·L + c·B·L² per call of the padding plan", () => {
    const r = simulate({ trace: manualTrace([0], 20), devices: 1, cost: { aMs: 1, bMsPerToken: 0.1, cMsPerToken2: 0.01 }, policy: sharedQueue() });
    assert.equal(r.latenciesMs[0], 1 + 0.1 * 20 + 0.01 * 20 * 20);
    assert.equal(r.usefulTokenFraction, 1);
  });

  it("the item cap and token budget close batches", () => {
    const trace = manualTrace([0, 1, 1, 1, 1]);
    const r = simulate({ trace, devices: 1, cost: flat10, policy: sharedQueue(), batching: { ...WORKER_BATCHING, maxBatchItems: 2 } });
    assert.deepEqual([...r.latenciesMs], [10, 19, 19, 29, 29]);
  });

  it("max wait holds a lone job for company unless its batch fills", () => {
    const r = simulate({ trace: manualTrace([0, 3]), devices: 1, cost: flat10, policy: sharedQueue(), batching: { ...WORKER_BATCHING, maxWaitMs: 5 } });
    assert.deepEqual([...r.latenciesMs], [15, 12]);
    const full = simulate({
      trace: manualTrace([0, 3]),
      devices: 1,
      cost: flat10,
      policy: sharedQueue(),
      batching: { ...WORKER_BATCHING, maxWaitMs: 5, maxBatchItems: 2 },
    });
    assert.deepEqual([...full.latenciesMs], [13, 10]);
  });

  it("shared queue never leaves a device idle while jobs wait; routers do", () => {
    const trace = generateTrace({ seed: 5, requests: 3_000, requestsPerSecond: 40 });
    const cost = { aMs: 2, bMsPerToken: 0.05, cMsPerToken2: 0 };
    const shared = simulate({ trace, devices: 4, cost, policy: sharedQueue() });
    assert.equal(shared.jobsWaitedWhileIdle, 0);
    assert.equal(shared.answeredFraction, 1);
    const rr = simulate({ trace, devices: 4, cost, policy: roundRobin() });
    assert.ok(rr.jobsWaitedWhileIdle > 0);
    assert.ok(shared.latency.all!.p99Ms <= rr.latency.all!.p99Ms);
    for (const b of shared.busyFraction) assert.ok(b > 0 && b < 1);
  });

  it("round robin over one device of equal jobs matches M/D/1; over four it equals the shared queue, until sizes vary", () => {
    // Unbatched (one item per call), fixed 10 ms service, Poisson arrivals at ρ = 0.7.
    const trace = generateTrace({
      seed: 11,
      requests: 40_000,
      requestsPerSecond: 70,
      models: [ONE_MODEL],
      fanOutMin: 1,
      fanOutMax: 1,
      burstFactor: 1,
    });
    const batching = { ...WORKER_BATCHING, maxBatchItems: 1 };
    const one = simulate({ trace, devices: 1, cost: flat10, policy: roundRobin(), batching });
    const rho = (0.7 * (trace.requests / (trace.durationMs / 1000))) / 70;
    const mdOneWait = (rho * 10) / (2 * (1 - rho));
    const wait = one.latency.all!.meanMs - 10;
    assert.ok(Math.abs(wait / mdOneWait - 1) < 0.1, `M/D/1 wait ${wait.toFixed(2)} ms vs ${mdOneWait.toFixed(2)} ms`);
    const four = generateTrace({ seed: 11, requests: 40_000, requestsPerSecond: 280, models: [ONE_MODEL], fanOutMin: 1, fanOutMax: 1, burstFactor: 1 });
    const rr = simulate({ trace: four, devices: 4, cost: flat10, policy: roundRobin(), batching });
    const shared = simulate({ trace: four, devices: 4, cost: flat10, policy: sharedQueue(), batching });
    assert.ok(rr.latency.all!.meanMs - 10 < mdOneWait, "Erlang-4 arrivals per device are smoother than Poisson");
    // With equal service times a FIFO M/D/c queue serves its servers in turn (the classical
    // reduction of M/D/c to E_c/D/1): the shared queue is round robin, job for job.
    assert.deepEqual(shared.latenciesMs, rr.latenciesMs);
    // Unequal sizes break the cycle: round robin queues behind long jobs while a device is free.
    const ragged = generateTrace({
      seed: 11,
      requests: 40_000,
      requestsPerSecond: 200,
      models: [{ ...ONE_MODEL, sigma: 0.8 }],
      fanOutMin: 1,
      fanOutMax: 1,
      burstFactor: 1,
    });
    const linear = { aMs: 2, bMsPerToken: 0.8, cMsPerToken2: 0 };
    const rrRagged = simulate({ trace: ragged, devices: 4, cost: linear, policy: roundRobin(), batching });
    const sharedRagged = simulate({ trace: ragged, devices: 4, cost: linear, policy: sharedQueue(), batching });
    assert.ok(sharedRagged.latency.all!.meanMs < rrRagged.latency.all!.meanMs, `${sharedRagged.latency.all!.meanMs} vs ${rrRagged.latency.all!.meanMs}`);
  });

  it("is deterministic for a seed, routers included", () => {
    const trace = generateTrace({ seed: 2, requests: 1_000, requestsPerSecond: 60 });
    const cost = { aMs: 2, bMsPerToken: 0.05, cMsPerToken2: 0 };
    for (const policy of [partitioned(), leastLoaded({ refreshMs: 50, countOwnSends: true, ties: "random" }), powerOfTwo({ refreshMs: 50 }), directRouter()]) {
      const a = simulate({ trace, devices: 4, cost, policy, seed: 9 });
      const b = simulate({ trace, devices: 4, cost, policy, seed: 9 });
      assert.deepEqual(a.latenciesMs, b.latenciesMs, policy.name);
    }
  });

  it("the direct router fills the first device first on a stale board", () => {
    const trace = manualTrace([0, 1, 2, 3]);
    const r = simulate({ trace, devices: 4, cost: flat10, policy: directRouter(), batching: { ...WORKER_BATCHING, maxBatchItems: 1 } });
    // The board says 0 everywhere until the next push at 200 ms: every job goes to device 0.
    assert.deepEqual([...r.latenciesMs], [10, 19, 28, 37]);
    assert.equal(r.jobsWaitedWhileIdle, 3);
  });

  it("loads a model that is not resident, paying its load time", () => {
    const models: TraceModel[] = [ONE_MODEL, { ...ONE_MODEL, id: "n" }];
    const trace: Trace = { ...manualTrace([0, 20]), models, jobs: manualTrace([0, 20]).jobs.map((j, i) => ({ ...j, model: i })) };
    const r = simulate({ trace, devices: 1, cost: flat10, policy: sharedQueue(), residentModels: 1, loadMs: 100 });
    assert.deepEqual([...r.latenciesMs], [10, 110]);
    assert.equal(r.loads, 1);
  });
});
