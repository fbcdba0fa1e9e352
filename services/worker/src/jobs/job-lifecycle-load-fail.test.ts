/**
 * The job lifecycle with a model that cannot load on this worker, on a share group: its jobs go
 * to other workers (declined, or round the retry topic on their last delivery), never failed while
 * another worker may run them. Fakes for the fleet, sink and router (no Kafka, no ONNX).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createLogger, encodeEnvelope, type CatalogModel } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { JobEnvelopeSchema, JobStatus, type JobEnvelope, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import type { Delivery, Settlement } from "../intake/intake.ts";
import { LoadBackoff } from "../residency/load-backoff.ts";
import { createWorkerMetrics } from "../telemetry/worker-metrics.ts";
import { createJobLifecycle } from "./job-lifecycle.ts";

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 5));
const corrupted = new Error("cannot load model at /models/m/model.onnx: Protobuf parsing failed.");

function delivery(deliveryCount: number, attempt = 1): Delivery & { settled: Array<[Settlement, number | undefined]> } {
  const settled: Array<[Settlement, number | undefined]> = [];
  const e = create(JobEnvelopeSchema, {
    jobId: "job-1",
    model: "m",
    attempt,
    replyTo: { topic: "shoal.replies.gw-1", partition: 0 },
    lane: Lane.INTERACTIVE,
    task: { case: "embed", value: { inputs: ["hello"] } },
  });
  return {
    topic: "shoal.jobs.default.interactive",
    partition: 0,
    offset: "0",
    value: Buffer.from(encodeEnvelope(e)),
    headers: undefined,
    deliveryCount,
    settled,
    settle: (o, restMs) => settled.push([o, restMs]),
  };
}

/** A share worker (delivery limit 5: dead-lettered from delivery 4) whose loads of `m` all fail, with the fleet's real backoff. */
function brokenWorker() {
  let now = 0;
  const backoff = new LoadBackoff({ now: () => now });
  const loads: string[] = [];
  const answered: JobResult[] = [];
  const retried: JobEnvelope[] = [];
  const jobs = createJobLifecycle({
    pool: "default",
    workerId: "w-2",
    groupId: "shoal-pool-default",
    maxInFlight: 4,
    maxDeliveries: 4,
    releaseRedelivers: true,
    model: (id) => (id === "m" ? ({ id, pool: "default", spec: { maxSequenceLength: 128 } } as unknown as CatalogModel) : undefined),
    fleet: {
      tryAcquire: () => undefined,
      // As the fleet does: the residency reports the failed load (LoadBackoff.failed), then rejects.
      acquire: async (model) => {
        loads.push(model);
        backoff.failed(model, corrupted);
        throw corrupted;
      },
      loadFailure: (model) => backoff.failure(model),
    },
    results: {
      async send(_topic, _partition, result) {
        answered.push(result);
      },
    },
    retries: {
      retriable: (attempt) => attempt < 3,
      async retry(env) {
        retried.push(env);
      },
      async deadLetter() {},
    },
    cancels: new Set<string>(),
    metrics: createWorkerMetrics(() => 0),
    logger: createLogger("test", "silent"),
    monotonicNow: () => 0,
  });
  return { jobs, loads, answered, retried, advance: (ms: number) => (now += ms) };
}

test("a failed load declines the job with the backoff as its rest; during the backoff the next job is declined at once without a load", async () => {
  const w = brokenWorker();
  const first = delivery(1);
  w.jobs.deliver(first);
  await tick();
  assert.deepEqual(first.settled, [["decline", 1_000]], "given back; its topic rests for the 1 s backoff");
  assert.deepEqual(w.loads, ["m"]);
  w.advance(400);
  const again = delivery(2);
  w.jobs.deliver(again);
  assert.deepEqual(again.settled, [["decline", 600]], "declined synchronously, before the intake's next fetch");
  assert.deepEqual(w.loads, ["m"], "no load tried during the backoff");
  w.advance(600);
  const due = delivery(1);
  w.jobs.deliver(due);
  await tick();
  assert.deepEqual(w.loads, ["m", "m"], "the backoff over, the next job tries the load again");
  assert.deepEqual(due.settled, [["decline", 2_000]], "failed again: the backoff doubles");
  assert.deepEqual(w.answered, [], "nothing answered: another worker may run them");
});

test("on its last delivery that may run, the job goes round the retry topic instead of failing Unavailable", async () => {
  const w = brokenWorker();
  const last = delivery(3);
  w.jobs.deliver(last);
  await tick();
  assert.deepEqual(
    w.retried.map((e) => [e.jobId, e.attempt]),
    [["job-1", 1]],
    "handed to the router, which writes attempt 2",
  );
  assert.deepEqual(last.settled, [["done", undefined]]);
  assert.deepEqual(w.answered, []);
});

test("on its last delivery and last attempt, the job is answered Unavailable (never dropped)", async () => {
  const w = brokenWorker();
  const last = delivery(3, 3);
  w.jobs.deliver(last);
  await tick();
  assert.deepEqual(w.retried, []);
  assert.equal(w.answered[0]?.status, JobStatus.UNAVAILABLE);
  assert.match(w.answered[0]!.message, /model 'm' could not be loaded on worker w-2: .*Protobuf parsing failed/);
  assert.deepEqual(last.settled, [["done", undefined]]);
});
