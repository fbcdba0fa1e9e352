import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createLogger, createRecordSigner, decodeEnvelope, encodeEnvelope, SIGNATURE_HEADER, WAKE_HEADER, type CatalogModel } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema, JobResultSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { Delivery, Settlement } from "../intake/intake.ts";
import { ModelTooLargeError } from "../residency/errors.ts";
import type { Lease } from "../residency/residency.ts";
import { createWorkerMetrics } from "../telemetry/worker-metrics.ts";
import { createJobLifecycle, type JobLifecycleDeps, type JobRunner } from "./job-lifecycle.ts";

/** A resolvable promise, to hold a produce until the test lets it land. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 5));

/** A record as an intake delivers it; `settled` lists each settle call in order. */
function delivery(value: Buffer | null, offset = "0"): Delivery & { settled: Settlement[] } {
  const settled: Settlement[] = [];
  return {
    topic: "shoal.jobs.default.interactive",
    partition: 0,
    offset,
    value,
    headers: undefined,
    deliveryCount: 1,
    settled,
    settle: (o) => settled.push(o),
  };
}

function envelope(
  init: Partial<{ jobId: string; attempt: number; deadlineUnixMs: bigint; enqueuedUnixMs: bigint; model: string; text: string; lane: Lane }> = {},
): Buffer {
  const e = create(JobEnvelopeSchema, {
    jobId: init.jobId ?? "job-1",
    model: init.model ?? "m",
    attempt: init.attempt ?? 1,
    deadlineUnixMs: init.deadlineUnixMs ?? 0n,
    enqueuedUnixMs: init.enqueuedUnixMs ?? 0n,
    replyTo: { topic: "shoal.replies.gw-1", partition: 0 },
    lane: init.lane ?? Lane.INTERACTIVE,
    task: { case: "embed", value: { inputs: [init.text ?? "hello"] } },
  });
  return Buffer.from(encodeEnvelope(e));
}

/**
 * The lifecycle with fakes for what it talks to (no Kafka, no ONNX): a runner that answers
 * with `outcome`, a result sink whose produces land when the test says, a retry router that
 * records what it is given.
 */
function harness(
  opts: { outcome?: JobStatus; resident?: boolean; loadError?: Error; unixNow?: () => number; queueMs?: number; deps?: Partial<JobLifecycleDeps> } = {},
) {
  const produced: Array<{ topic: string; result: JobResult; landed: ReturnType<typeof deferred> }> = [];
  const retried: JobEnvelope[] = [];
  const dead: Array<{ reason: string; attempts: number; value: Buffer | null }> = [];
  const submitted: string[] = [];
  const released: string[] = [];
  const cancels = new Set<string>();
  const runner: JobRunner = {
    submit(env, _trace, onFinish) {
      submitted.push(`${env.jobId}#${env.attempt}`);
      const status = opts.outcome ?? JobStatus.OK;
      queueMicrotask(() =>
        onFinish(
          create(JobResultSchema, {
            jobId: env.jobId,
            status,
            attempt: env.attempt,
            message: status === JobStatus.OK ? "" : "inference failed: Gather index out of range",
            ...(opts.queueMs !== undefined ? { timings: { queueMs: opts.queueMs } } : {}),
          }),
        ),
      );
    },
  };
  const lease = (model: string): Lease<JobRunner> => ({ model, resource: runner, release: () => released.push(model) });
  const metrics = createWorkerMetrics(() => 0);
  const jobs = createJobLifecycle({
    pool: "default",
    workerId: "w-1",
    groupId: "shoal-pool-default",
    maxInFlight: 4,
    model: (id) => (id === "m" || id === "m2" ? ({ id, pool: "default", spec: { maxSequenceLength: 128 } } as unknown as CatalogModel) : undefined),
    fleet: {
      tryAcquire: (model) => (opts.resident === false ? undefined : lease(model)),
      acquire: (model) => (opts.loadError ? Promise.reject(opts.loadError) : Promise.resolve(lease(model))),
    },
    results: {
      send(topic, _partition, result) {
        const landed = deferred();
        produced.push({ topic, result, landed });
        return landed.promise;
      },
    },
    retries: {
      retriable: (attempt) => attempt < 3,
      async retry(env) {
        retried.push(env);
      },
      async deadLetter(value, reason, meta) {
        dead.push({ reason, attempts: meta.attempts, value });
      },
    },
    cancels,
    metrics,
    logger: createLogger("test", "silent"),
    monotonicNow: () => performance.now(),
    ...(opts.unixNow ? { unixNow: opts.unixNow } : {}),
    ...opts.deps,
  });
  return { jobs, produced, retried, dead, submitted, released, cancels, metrics };
}

const harnessWith = (deps: Partial<JobLifecycleDeps>) => harness({ deps });

/** A share worker's budgets with a forecast that records the waiting work it is asked about. */
const takeAhead = (asked: number[], drainMs: (units: number) => number | undefined): Partial<JobLifecycleDeps> => ({
  prefetchTokens: 256,
  idleTakeTokens: 1_000,
  msToDrain: (units) => {
    asked.push(units);
    return drainMs(units);
  },
});

describe("job lifecycle", () => {
  test("a computed job's queue time is split: in Kafka until this worker took it, then held here", async () => {
    // Taken 30 ms after the gateway's enqueue; its batch started 75 ms after it: 45 ms held here.
    const h = harness({ unixNow: () => 10_000, queueMs: 75 });
    h.jobs.deliver(delivery(envelope({ enqueuedUnixMs: 9_970n })));
    await tick();
    assert.equal(h.produced[0]!.result.timings?.heldMs, 45);
    const waits = (await h.metrics.jobWaitSeconds.get()).values;
    const sum = (where: string): number | undefined => waits.find((v) => v.metricName?.endsWith("_sum") && v.labels["where"] === where)?.value;
    assert.equal(sum("queue"), 0.03);
    assert.equal(sum("worker"), 0.045);
    // A gateway stamp from a clock ahead of this one: the worker's own queue_ms bounds the Kafka part.
    const skewed = harness({ unixNow: () => 10_000, queueMs: 20 });
    skewed.jobs.deliver(delivery(envelope({ enqueuedUnixMs: 9_900n })));
    await tick();
    assert.equal(skewed.produced[0]!.result.timings?.heldMs, 0);
    // The answer says how often the queue handed the job out: once here; a job given back once, twice.
    assert.equal(h.produced[0]!.result.timings?.deliveries, 1);
    const again = harness({ unixNow: () => 10_000, queueMs: 20 });
    again.jobs.deliver({ ...delivery(envelope({ enqueuedUnixMs: 9_990n })), deliveryCount: 2 });
    await tick();
    assert.equal(again.produced[0]!.result.timings?.deliveries, 2);
  });

  test("a job runs once and its record is settled only after its result is on the reply topic", async () => {
    const h = harness();
    const d = delivery(envelope());
    h.jobs.deliver(d);
    await tick();
    assert.deepEqual(h.submitted, ["job-1#1"]);
    assert.equal(h.produced.length, 1);
    assert.equal(h.produced[0]!.topic, "shoal.replies.gw-1");
    assert.equal(h.produced[0]!.result.status, JobStatus.OK);
    // Produced but not yet acknowledged by the broker: the record must not be settled.
    assert.deepEqual(d.settled, []);
    assert.equal(h.jobs.size, 1);
    assert.deepEqual(h.released, ["m"], "the model is let go once the rows are computed");
    h.produced[0]!.landed.resolve();
    await tick();
    assert.deepEqual(d.settled, ["done"]);
    assert.equal(h.jobs.size, 0);
  });

  test("a duplicate delivery of the same job attempt joins it: one run, one answer, both records settled", async () => {
    const h = harness({ resident: false });
    const first = delivery(envelope(), "7");
    const again = delivery(envelope(), "7");
    h.jobs.deliver(first);
    h.jobs.deliver(again);
    await tick();
    assert.deepEqual(h.submitted, ["job-1#1"]);
    assert.equal(h.produced.length, 1);
    h.produced[0]!.landed.resolve();
    await tick();
    assert.deepEqual(first.settled, ["done"]);
    assert.deepEqual(again.settled, ["done"]);
  });

  test("the next attempt of a job is a job of its own, even while the previous attempt is in hand", async () => {
    const h = harness();
    h.jobs.deliver(delivery(envelope({ attempt: 1 })));
    h.jobs.deliver(delivery(envelope({ attempt: 2 })));
    await tick();
    assert.deepEqual(h.submitted, ["job-1#1", "job-1#2"]);
  });

  test("a job whose deadline passed before it started is answered DEADLINE_EXCEEDED without running", async () => {
    const now = 1_700_000_000_000;
    const h = harness({ unixNow: () => now });
    const d = delivery(envelope({ deadlineUnixMs: BigInt(now - 1) }));
    h.jobs.deliver(d);
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.produced[0]!.result.status, JobStatus.DEADLINE_EXCEEDED);
    assert.match(h.produced[0]!.result.message, /deadline passed before the job was pulled; nothing was computed/);
    h.produced[0]!.landed.resolve();
    await tick();
    assert.deepEqual(d.settled, ["done"]);
  });

  test("a job whose caller cancelled is answered CANCELLED without running", async () => {
    const h = harness();
    h.cancels.add("job-9");
    h.jobs.deliver(delivery(envelope({ jobId: "job-9" })));
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.produced[0]!.result.status, JobStatus.CANCELLED);
  });

  test("a job that expires while its model loads is not run, and the model is let go", async () => {
    let now = 1_700_000_000_000;
    const h = harness({ resident: false, unixNow: () => now });
    h.jobs.deliver(delivery(envelope({ deadlineUnixMs: BigInt(now + 10) })));
    now += 20;
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.produced[0]!.result.status, JobStatus.DEADLINE_EXCEEDED);
    assert.match(h.produced[0]!.result.message, /while its model loaded/);
    assert.deepEqual(h.released, ["m"]);
  });

  test("errors map to statuses once: unknown model NOT_FOUND, too large RESOURCE_EXHAUSTED, load failure UNAVAILABLE", async () => {
    const unknown = harness();
    unknown.jobs.deliver(delivery(envelope({ model: "nope" })));
    const tooLarge = harness({ resident: false, loadError: new ModelTooLargeError("m", 10, 5) });
    tooLarge.jobs.deliver(delivery(envelope()));
    const broken = harness({ resident: false, loadError: new Error("model.onnx: no such file") });
    broken.jobs.deliver(delivery(envelope()));
    await tick();
    assert.equal(unknown.produced[0]!.result.status, JobStatus.NOT_FOUND);
    assert.match(unknown.produced[0]!.result.message, /model 'nope' is not served by pool 'default'/);
    assert.equal(tooLarge.produced[0]!.result.status, JobStatus.RESOURCE_EXHAUSTED);
    assert.equal(broken.produced[0]!.result.status, JobStatus.UNAVAILABLE);
    assert.match(broken.produced[0]!.result.message, /could not be loaded on worker w-1: model.onnx: no such file/);
  });

  test("metric labels never take a model name from a record: unknown models count as 'other'", async () => {
    const h = harness();
    for (let i = 0; i < 5; i++) h.jobs.deliver(delivery(envelope({ jobId: `j-${i}`, model: `attacker-${i}-${"x".repeat(200)}` })));
    await tick();
    for (const p of h.produced) p.landed.resolve();
    await tick();
    const text = await h.metrics.registry.metrics();
    const models = new Set([...text.matchAll(/shoal_worker_jobs_total\{[^}]*model="([^"]*)"/g)].map((m) => m[1]));
    assert.deepEqual([...models], ["other"]);
    assert.equal(h.produced.length, 5, "each still answered NOT_FOUND");
  });

  test("with cluster keys, unsigned and wrongly signed job records are rejected before decoding; a signed one runs", async () => {
    const key = Buffer.alloc(32, 7);
    const signer = createRecordSigner([key]);
    const h = harnessWith({ signer });
    const unsigned = delivery(envelope({ jobId: "j-unsigned" }));
    const wrong = envelope({ jobId: "j-wrong" });
    const signedValue = envelope({ jobId: "j-signed" });
    const forged = { ...delivery(wrong), headers: { [SIGNATURE_HEADER]: createRecordSigner([Buffer.alloc(32, 8)]).sign("job", wrong)! } };
    const signed = { ...delivery(signedValue), headers: { [SIGNATURE_HEADER]: signer.sign("job", signedValue)! } };
    h.jobs.deliver(unsigned);
    h.jobs.deliver(forged);
    h.jobs.deliver(signed);
    await tick();
    assert.deepEqual(
      h.produced.map((p) => p.result.jobId),
      ["j-signed"],
    );
    assert.equal((await h.metrics.registry.getSingleMetric("shoal_worker_records_rejected_total")?.get())?.values[0]?.value, 2);
  });

  test("a failed run goes to the retry topic with its record settled; the last attempt is dead-lettered and answered INTERNAL", async () => {
    const h = harness({ outcome: JobStatus.INTERNAL });
    const first = delivery(envelope({ attempt: 1 }));
    h.jobs.deliver(first);
    await tick();
    assert.equal(h.retried.length, 1);
    assert.equal(h.retried[0]!.attempt, 1, "the router raises the attempt itself");
    assert.deepEqual(first.settled, ["done"]);
    assert.equal(h.produced.length, 0, "nobody is answered while attempts are left");

    const last = delivery(envelope({ attempt: 3 }));
    h.jobs.deliver(last);
    await tick();
    assert.equal(h.retried.length, 1);
    assert.equal(h.dead.length, 1);
    assert.equal(h.dead[0]!.attempts, 3);
    assert.equal(decodeEnvelope(h.dead[0]!.value).jobId, "job-1", "the dead letter is the job itself");
    assert.equal(h.produced[0]!.result.status, JobStatus.INTERNAL);
    assert.match(h.produced[0]!.result.message, /failed 3 time\(s\) and was moved to the dead-letter topic shoal\.dead\.default: inference failed: Gather/);
    assert.deepEqual(last.settled, [], "settled only once the answer lands");
    h.produced[0]!.landed.resolve();
    await tick();
    assert.deepEqual(last.settled, ["done"]);
    const deadLetters = (await h.metrics.deadLetters.get()).values;
    assert.deepEqual(
      deadLetters.map((v) => [v.labels["reason"], v.value]),
      [["failed", 1]],
    );
    assert.equal((await h.metrics.retries.get()).values[0]?.value, 1);
  });

  test("while draining, a failed run is answered as it is rather than retried", async () => {
    const h = harness({ outcome: JobStatus.INTERNAL });
    void h.jobs.drain(0);
    h.jobs.deliver(delivery(envelope()));
    await tick();
    assert.equal(h.retried.length, 0);
    assert.equal(h.produced[0]!.result.status, JobStatus.INTERNAL);
  });

  test("a result that cannot be produced gives the record back for redelivery", async () => {
    const h = harness();
    const d = delivery(envelope());
    h.jobs.deliver(d);
    await tick();
    h.produced[0]!.landed.reject(new Error("producer closed"));
    await tick();
    assert.deepEqual(d.settled, ["release"]);
    assert.equal(h.jobs.size, 0);
  });

  test("an undecodable record is dead-lettered as it came and rejected; nothing runs", async () => {
    const h = harness();
    const garbage = Buffer.from([0xff, 0xff, 0xff, 0x01]);
    const d = delivery(garbage, "42");
    h.jobs.deliver(d);
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.dead.length, 1);
    assert.deepEqual(h.dead[0]!.value, garbage);
    assert.equal(h.dead[0]!.attempts, 0);
    assert.deepEqual(d.settled, ["reject"]);
    assert.equal(h.produced.length, 0);
  });

  test("a wake-up marker (WAKE_HEADER, no job) is acknowledged at once: nothing runs, nothing is dead-lettered", async () => {
    const h = harness();
    const d = { ...delivery(Buffer.alloc(0), "7"), headers: { [WAKE_HEADER]: "1" } };
    h.jobs.deliver(d);
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.dead.length, 0);
    assert.deepEqual(d.settled, ["done"]);
    assert.equal(h.jobs.size, 0);
  });

  test("holds(model) while a job of it waits or computes, not once it is computed and its answer is on its way", async () => {
    const h = harness();
    h.jobs.deliver(delivery(envelope({ model: "m" })));
    assert.equal(h.jobs.holds?.("m"), true);
    assert.equal(h.jobs.holds?.("m2"), false);
    await tick(); // computed; the result's produce has not landed, so the record is not settled yet
    assert.equal(h.produced.length, 1);
    assert.equal(h.jobs.size, 1);
    assert.equal(h.jobs.holds?.("m"), false);
  });

  test("room counts down with jobs in hand and drain waits for them", async () => {
    const h = harness();
    for (let i = 0; i < 3; i++) h.jobs.deliver(delivery(envelope({ jobId: `j${i}` })));
    await tick();
    assert.equal(h.jobs.room(), 1);
    const drained = h.jobs.drain(5_000);
    for (const p of h.produced) p.landed.resolve();
    assert.equal(await drained, 0);
    assert.equal(h.jobs.room(), 4);
  });

  test("abandoned past the drain grace: jobs still in hand are given back, not answered", async () => {
    const h = harness({ resident: false });
    const d = delivery(envelope({ jobId: "slow" }));
    h.jobs.deliver(d);
    assert.equal(await h.jobs.drain(0), 1);
    assert.deepEqual(h.jobs.abandon(), ["slow"]);
    await tick();
    assert.equal(h.produced.length, 0, "no answer is produced for an abandoned job");
    assert.deepEqual(d.settled, ["release"]);
  });

  test("with a prefetch budget, room follows the estimated tokens of jobs not yet computing", async () => {
    const h = harnessWith({ prefetchTokens: 100 });
    assert.equal(h.jobs.room(), 1, "with nothing waiting, at least one job is taken");
    // ~60 tokens each (228 characters / 4 + 2): one fills most of the budget.
    h.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(228) })));
    assert.equal(h.jobs.room(), 1);
    h.jobs.deliver(delivery(envelope({ jobId: "b", text: "x".repeat(228) })));
    assert.equal(h.jobs.room(), 0, "120 estimated tokens wait: over the budget of 100");
  });

  test("with a prefetch budget, a job counts until it is settled, not only until it starts: a worker running a long job takes nothing more", async () => {
    const traces: Array<{ batchStarted(atMs: number): void }> = [];
    const finishers: Array<() => void> = [];
    const h = harnessWith({
      prefetchTokens: 100,
      idleTakeTokens: 1_000,
      fleet: {
        tryAcquire: (model) => ({
          model,
          resource: {
            submit(env, trace, onFinish) {
              traces.push(trace);
              finishers.push(() => onFinish(create(JobResultSchema, { jobId: env.jobId, status: JobStatus.OK, attempt: env.attempt })));
            },
          },
          release: () => undefined,
        }),
        acquire: () => Promise.reject(new Error("not used")),
      },
    });
    assert.equal(h.jobs.room(), 4, "holding nothing: a batch's worth (1,000 tokens of ~64-token jobs, capped by maxInFlight)");
    // ~120 estimated tokens: over the budget of 100 by itself.
    h.jobs.deliver(delivery(envelope({ jobId: "long", text: "x".repeat(472) })));
    assert.equal(h.jobs.room(), 0);
    traces[0]!.batchStarted(performance.now());
    assert.equal(h.jobs.room(), 0, "still 0 while it computes: an idle worker should take the next job");
    finishers[0]!();
    await tick();
    for (const p of h.produced) p.landed.resolve();
    await tick();
    assert.ok(h.jobs.room() >= 1, "settled: room again");
  });

  test("take-ahead: a busy worker takes the idle take once its work in hand is predicted done within the take-ahead, not earlier", () => {
    const traces: Array<{ batchStarted(atMs: number): void }> = [];
    // A forecast: the call in progress ends in `callLeftMs`, then 0.001 ms per waiting token-equivalent.
    let callLeftMs: number | undefined;
    const asked: number[] = [];
    const h = harnessWith({
      ...takeAhead(asked, (units) => (callLeftMs === undefined && units === 0 ? undefined : (callLeftMs ?? 0) + units * 0.001)),
      perCallOverheadTokens: 25_000,
      takeAheadMs: 40,
      fleet: {
        tryAcquire: (model) => ({ model, resource: { submit: (_env, trace) => void traces.push(trace) }, release: () => undefined }),
        acquire: () => Promise.reject(new Error("not used")),
      },
    });
    h.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    callLeftMs = 20;
    assert.equal(h.jobs.room(), 0, "job a waits: 20 ms of call left, then its own call (~25 ms) is 45 ms, over 40");
    assert.ok(asked.at(-1)! > 25_000 && asked.at(-1)! < 25_100, `a waiting job counts its tokens and one call of its model: ${asked.at(-1)}`);
    callLeftMs = 5;
    assert.equal(h.jobs.room(), 3, "5 + ~25 ms = 30 ms, within 40: the idle take (1,000 tokens of ~60-token jobs), less the slot job a holds");
    traces[0]!.batchStarted(performance.now());
    callLeftMs = undefined;
    assert.equal(h.jobs.room(), 0, "computing, its end not known yet (nothing learned)");
    assert.equal(asked.at(-1), 0, "nothing waits once its batch started");
    callLeftMs = 60;
    assert.equal(h.jobs.room(), 0, "60 ms to go: a take now would hold jobs an idle worker could run");
    callLeftMs = 40;
    assert.equal(h.jobs.room(), 3, "40 ms to go: the idle take");
    h.jobs.deliver(delivery(envelope({ jobId: "b", model: "m2", text: "x".repeat(32) })));
    callLeftMs = 20;
    assert.equal(h.jobs.room(), 0, "job b of another model waits: 20 ms + its call (~25 ms), over 40");
    callLeftMs = 10;
    assert.equal(h.jobs.room(), 2, "10 + ~25 ms, within 40: the idle take, less the slots of a and b");
    const started: Array<{ batchStarted(atMs: number): void }> = [];
    const off = harnessWith({
      prefetchTokens: 256,
      idleTakeTokens: 1_000,
      perCallOverheadTokens: 25_000,
      msToDrain: () => 0,
      fleet: {
        tryAcquire: (model) => ({ model, resource: { submit: (_env, trace) => void started.push(trace) }, release: () => undefined }),
        acquire: () => Promise.reject(new Error("not used")),
      },
    });
    off.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    started[0]!.batchStarted(performance.now());
    assert.equal(off.jobs.room(), 0, "no take-ahead set (SHOAL_TAKE_AHEAD_MS 0): work about to end opens no room");
  });

  test("take-ahead: waiting jobs count a call per batch their model's tokens fill, not one per model", () => {
    const asked: number[] = [];
    const h = harnessWith({ ...takeAhead(asked, () => undefined), maxInFlight: 8, perCallOverheadTokens: 1_000, batchMaxTokens: 100, takeAheadMs: 1 });
    // ~60 estimated tokens each (text of 232 characters): three fill two batches of 100 tokens.
    for (const id of ["a", "b", "c"]) h.jobs.deliver(delivery(envelope({ jobId: id, text: "x".repeat(232) })));
    h.jobs.room();
    const tokens = asked.at(-1)! % 1_000;
    assert.ok(tokens > 100 && tokens <= 200, `three jobs' tokens: ${tokens}`);
    assert.equal(Math.floor(asked.at(-1)! / 1_000), 2, "two batches of one model: two calls");
    h.jobs.deliver(delivery(envelope({ jobId: "d", model: "m2", text: "x".repeat(32) })));
    h.jobs.room();
    assert.equal(Math.floor(asked.at(-1)! / 1_000), 3, "and a call for the other model");
  });

  test("take-ahead with a lead that follows the take round trip: the lead is read at each take", () => {
    const asked: number[] = [];
    let lead: number | undefined;
    const h = harnessWith({
      ...takeAhead(asked, () => 30),
      perCallOverheadTokens: 1_000,
      takeAheadMs: () => lead,
    });
    assert.equal(h.jobs.room(), 4, "idle: the idle take, capped by the 4 slots");
    h.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    assert.equal(h.jobs.room(), 0, "busy (a call's 1,000-token overhead is over the 256-token budget), the lead not known yet: no take-ahead");
    lead = 20;
    assert.equal(h.jobs.room(), 0, "30 ms to drain, over a 20 ms lead");
    lead = 33;
    assert.equal(h.jobs.room(), 3, "30 ms to drain, within a 33 ms lead: the idle take, less job a's slot");
    assert.equal(h.jobs.msToDrain(), 30, "the forecast, as the share intake's give-back rule reads it");
    assert.equal(harnessWith(takeAhead([], () => 30)).jobs.msToDrain(), 0, "holding nothing: free now");
    assert.equal(harnessWith({}).jobs.msToDrain(), 0, "no forecast, holding nothing: free now");
    const unknown = harnessWith({});
    unknown.jobs.deliver(delivery(envelope({ jobId: "b", text: "x".repeat(32) })));
    assert.equal(unknown.jobs.msToDrain(), undefined, "no forecast, holding a job: not known");
  });

  test("a simulated network (arrivalDelayMs): a job taken is held and counted at once, and starts only once it has arrived", async () => {
    const asked: number[] = [];
    const h = harnessWith({ ...takeAhead(asked, (units) => units * 0.001), perCallOverheadTokens: 1_000, takeAheadMs: 1, arrivalDelayMs: 40 });
    const t0 = performance.now();
    h.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    assert.deepEqual(h.submitted, [], "nothing runs while the job is on its way");
    assert.equal(h.jobs.room(), 0, "but it is held: a busy worker's room (its call's 1,000-token overhead is over the 256-token budget)");
    const drain = h.jobs.msToDrain();
    assert.ok(drain !== undefined && drain > 1 && drain < 1.1, `the forecast counts its call: ${drain} ms`);
    await tick();
    assert.deepEqual(h.submitted, [], "5 ms on: still on its way");
    while (h.submitted.length === 0 && performance.now() - t0 < 2_000) await tick();
    assert.deepEqual(h.submitted, ["a#1"]);
    assert.ok(performance.now() - t0 >= 39, `it ran after ${(performance.now() - t0).toFixed(1)} ms, not before the 40 ms delay`);
  });

  test("a job delivered as often as the limit allows is dead-lettered with its reason, not run", async () => {
    const h = harnessWith({ maxDeliveries: 4 });
    const d = { ...delivery(envelope()), deliveryCount: 4 };
    h.jobs.deliver(d);
    await tick();
    assert.deepEqual(h.submitted, []);
    assert.equal(h.dead.length, 1);
    assert.match(h.dead[0]!.reason, /delivered 4 times without an answer/);
    assert.equal(h.produced[0]!.result.status, JobStatus.INTERNAL);
  });

  test("with a per-call overhead, each model held costs a call: a busy worker takes no job a free worker would run a call sooner", () => {
    // CPU-like: a call costs 40 token-equivalents; ~10-token jobs.
    const same = harnessWith({ prefetchTokens: 100, perCallOverheadTokens: 40 });
    same.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    same.jobs.deliver(delivery(envelope({ jobId: "b", text: "x".repeat(32) })));
    assert.equal(same.jobs.room(), 1, "two jobs of one model: 20 tokens + one call of 40 held, 40 free");
    const mixed = harnessWith({ prefetchTokens: 100, perCallOverheadTokens: 40 });
    mixed.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    mixed.jobs.deliver(delivery(envelope({ jobId: "b", model: "m2", text: "x".repeat(32) })));
    assert.equal(mixed.jobs.room(), 0, "two models held: 20 tokens + two calls of 40 fill the budget");
    // GPU-like: a call costs more than the whole look-ahead budget, so a busy worker takes nothing.
    const gpu = harnessWith({ prefetchTokens: 256, perCallOverheadTokens: 25_000 });
    assert.ok(gpu.jobs.room() >= 1, "holding nothing: it takes work");
    gpu.jobs.deliver(delivery(envelope({ jobId: "a", text: "x".repeat(32) })));
    assert.equal(gpu.jobs.room(), 0, "holding one small job: one call of work in hand already exceeds the look-ahead");
  });

  test("held record bytes bound the room too: a few huge records stop the intake before the job count does", async () => {
    const h = harnessWith({ maxInFlightBytes: 4_000 });
    assert.equal(h.jobs.room(), 4, "nothing held: the job count decides");
    h.jobs.deliver(delivery(envelope({ jobId: "big-1", text: "x".repeat(2_500) })));
    assert.ok(h.jobs.heldBytes > 2_500, `held ${h.jobs.heldBytes} bytes`);
    assert.equal(h.jobs.room(), 3, "under the byte limit: slots left");
    h.jobs.deliver(delivery(envelope({ jobId: "big-2", text: "x".repeat(2_500) })));
    assert.equal(h.jobs.room(), 0, "over 4,000 bytes held with 2 of 4 slots used");
    await tick();
    for (const p of h.produced) p.landed.resolve();
    await tick();
    assert.equal(h.jobs.heldBytes, 0, "settled jobs release their bytes");
    assert.equal(h.jobs.room(), 4);
  });

  test("batch-lane jobs waiting hold back batch-lane room, never interactive room", () => {
    const h = harnessWith({ prefetchTokens: 100 });
    h.jobs.deliver(delivery(envelope({ jobId: "bulk", text: "x".repeat(800), lane: Lane.BATCH })));
    assert.equal(h.jobs.room("batch"), 0, "202 estimated batch-lane tokens wait");
    assert.ok(h.jobs.room("interactive") >= 1, "an interactive job is still asked for");
  });
});
