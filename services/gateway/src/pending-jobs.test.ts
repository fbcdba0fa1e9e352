import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { DeadlineError } from "./errors.ts";
import { PendingJobs } from "./pending-jobs.ts";

const result = (jobId: string) => create(JobResultSchema, { jobId, status: JobStatus.OK });

test("a result settles its call once; duplicates and strangers are dropped", async () => {
  const pending = new PendingJobs();
  const call = pending.register("a", Date.now() + 10_000, new AbortController().signal);
  assert.equal(pending.settle(result("a")), "delivered");
  assert.equal(pending.settle(result("a")), "unknown", "duplicate");
  assert.equal(pending.settle(result("zzz")), "unknown", "nobody waits");
  assert.equal((await call).jobId, "a");
  assert.equal(pending.size, 0);
});

test("the deadline rejects the call with DeadlineError; a late result is dropped", async () => {
  const pending = new PendingJobs();
  const call = pending.register("b", Date.now() + 20, new AbortController().signal);
  await assert.rejects(call, DeadlineError);
  assert.equal(pending.settle(result("b")), "unknown");
});

test("the caller going away rejects with the signal's reason", async () => {
  const pending = new PendingJobs();
  const ac = new AbortController();
  const call = pending.register("c", Date.now() + 10_000, ac.signal);
  ac.abort(new Error("client left"));
  await assert.rejects(call, /client left/);
  assert.equal(pending.size, 0);
});

test("drained() waits for in-flight calls, bounded", async () => {
  const pending = new PendingJobs();
  const call = pending.register("d", Date.now() + 10_000, new AbortController().signal);
  setTimeout(() => pending.settle(result("d")), 30);
  assert.equal(await pending.drained(5_000), true);
  await call;
  void pending.register("e", Date.now() + 10_000, new AbortController().signal).catch(() => undefined);
  assert.equal(await pending.drained(30), false);
  pending.fail("e", new Error("stop"));
});

test("a result for a job given up as Unavailable is reported once; others are not; the memory is bounded", async () => {
  const reported: string[] = [];
  const pending = new PendingJobs((jobId) => reported.push(jobId), 2);
  const call = pending.register("d", Date.now() + 10_000, new AbortController().signal);
  pending.fail("d", new Error("job queue unavailable"));
  await assert.rejects(call, /job queue unavailable/);
  pending.givenUp("d");
  assert.equal(pending.settle(result("d")), "unknown");
  assert.equal(pending.settle(result("d")), "unknown", "a duplicate of it is not reported again");
  assert.equal(pending.settle(result("stranger")), "unknown");
  assert.deepEqual(reported, ["d"]);
  // Bounded: the oldest of three given-up jobs is forgotten with a limit of two.
  for (const id of ["e", "f", "g"]) pending.givenUp(id);
  for (const id of ["e", "f", "g"]) pending.settle(result(id));
  assert.deepEqual(reported, ["d", "f", "g"]);
});
