import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createLogger, jobsTopic, routedTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { WorkerStatusSchema, type WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import type { Message } from "kafkajs";
import { EnvReader } from "@shoal/common";
import { readDispatchConfig, type RoutedDispatchConfig } from "./dispatch-config.ts";
import { createRoutedDispatch } from "./routed-dispatch.ts";

const logger = createLogger("test", "silent");

function worker(id: string, inFlightJobs = 0, pendingTokens = 0, routedIntake = true, updatedUnixMs = 0): WorkerStatus {
  return create(WorkerStatusSchema, {
    workerId: id,
    pool: "p",
    routedIntake,
    inFlightJobs,
    pendingTokens: BigInt(pendingTokens),
    intervalMs: 200,
    updatedUnixMs: BigInt(updatedUnixMs),
  });
}

function dispatchOver(config: RoutedDispatchConfig, workers: () => WorkerStatus[], resent: [string, Message][] = []) {
  return createRoutedDispatch({ config, workers, logger, resend: async (t, m) => void resent.push([t, m]), random: () => 0.5 });
}

const job = (n: number, tokens = 10) => ({ jobId: `j${n}`, pool: "p", lane: Lane.INTERACTIVE as const, model: "m", tokens });
const base = { refreshMs: 0, countOwnSends: true, keepOwnSends: false, ties: "first", metric: "pending-tokens" } as const;

test("round robin alternates over the pool's routed workers only", () => {
  const d = dispatchOver({ ...base, mode: "round-robin" }, () => [worker("a"), worker("b"), worker("c", 0, 0, false)]);
  const picks = [0, 1, 2, 3].map((n) => d.place(job(n)));
  assert.deepEqual(
    picks.map((p) => p.workerId),
    ["a", "b", "a", "b"],
  );
  assert.equal(picks[1]!.topic, routedTopic("p", "b", Lane.INTERACTIVE));
});

test("least-loaded reads pending tokens and counts its own sends between refreshes", () => {
  const d = dispatchOver({ ...base, mode: "least-loaded", refreshMs: 60_000 }, () => [worker("a", 1, 100), worker("b", 1, 40)]);
  // b (40) gets jobs of 25 tokens until it passes a (100): 40, 65, 90 → b, then 115 > 100 → a.
  const picks = [0, 1, 2, 3].map((n) => d.place(job(n, 25)).workerId);
  assert.deepEqual(picks, ["b", "b", "b", "a"]);
});

test("least-loaded with the board read before each job: its own sends are forgotten at each read, unless kept until a status newer than them", () => {
  // Both statuses are from a second ago: neither shows the jobs this gateway sent since.
  const statuses = (): WorkerStatus[] => [worker("a", 0, 0, true, Date.now() - 1_000), worker("b", 0, 10, true, Date.now() - 1_000)];
  const forgetting = dispatchOver({ ...base, mode: "least-loaded" }, statuses);
  assert.deepEqual(
    [0, 1, 2, 3].map((n) => forgetting.place(job(n, 25)).workerId),
    ["a", "a", "a", "a"],
    "every read replaces the board with the statuses: a (0) is the least loaded every time",
  );
  const keeping = dispatchOver({ ...base, mode: "least-loaded", keepOwnSends: true }, statuses);
  assert.deepEqual(
    [0, 1, 2, 3].map((n) => keeping.place(job(n, 25)).workerId),
    ["a", "b", "a", "b"],
    "sends after the statuses stay counted: a 0 → 25, b 10 → 35, a 50, b 60",
  );
  // A status measured after the sends shows them: the kept sends go.
  let fresh = false;
  const later = dispatchOver({ ...base, mode: "least-loaded", keepOwnSends: true }, () =>
    fresh ? [worker("a", 0, 0, true, Date.now() + 1_000), worker("b", 0, 10, true, Date.now() + 1_000)] : statuses(),
  );
  assert.deepEqual(
    [0, 1].map((n) => later.place(job(n, 25)).workerId),
    ["a", "b"],
  );
  fresh = true;
  assert.equal(later.place(job(2, 25)).workerId, "a", "the newer statuses (a 0, b 10) replace the kept sends");
});

test("SHOAL_DISPATCH_KEEP_OWN: least-loaded and p2c only, off by default", () => {
  const read = (env: Record<string, string>) => {
    const r = new EnvReader(env);
    const c = readDispatchConfig(r);
    return { c, problems: () => r.done({}) };
  };
  const ll = read({ SHOAL_DISPATCH: "least-loaded" }).c as RoutedDispatchConfig;
  assert.equal(ll.keepOwnSends, false);
  assert.equal((read({ SHOAL_DISPATCH: "p2c", SHOAL_DISPATCH_KEEP_OWN: "1" }).c as RoutedDispatchConfig).keepOwnSends, true);
  assert.throws(() => read({ SHOAL_DISPATCH: "round-robin", SHOAL_DISPATCH_KEEP_OWN: "1" }).problems(), /SHOAL_DISPATCH_KEEP_OWN: only applies/);
});

test("sie-direct: queue depth, fill-first, own sends not counted", () => {
  const d = dispatchOver({ ...base, mode: "sie-direct", refreshMs: 60_000, countOwnSends: false, metric: "queue-depth" }, () => [
    worker("a", 2, 0),
    worker("b", 2, 999),
  ]);
  assert.deepEqual(
    [0, 1, 2].map((n) => d.place(job(n)).workerId),
    ["a", "a", "a"],
  );
});

test("no routed worker: the pool's shared topic", () => {
  const d = dispatchOver({ ...base, mode: "p2c" }, () => [worker("a", 0, 0, false)]);
  assert.deepEqual(d.place(job(0)), { topic: jobsTopic("p", Lane.INTERACTIVE), workerId: undefined });
});

test("a job whose worker went away is written again to the shared topic, once", async () => {
  let live = [worker("a"), worker("b")];
  const resent: [string, Message][] = [];
  const d = createRoutedDispatch({
    config: { ...base, mode: "round-robin" },
    workers: () => live,
    logger,
    resend: async (t, m) => void resent.push([t, m]),
    rescueCheckMs: 10,
  });
  d.start();
  try {
    const pa = d.place(job(0));
    const pb = d.place(job(1));
    d.sent("j0", pa, { key: "j0", value: Buffer.from("x") }, jobsTopic("p", Lane.INTERACTIVE));
    d.sent("j1", pb, { key: "j1", value: Buffer.from("y") }, jobsTopic("p", Lane.INTERACTIVE));
    d.ended("j1");
    live = [worker("b")];
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(
      resent.map(([t, m]) => [t, m.key]),
      [[jobsTopic("p", Lane.INTERACTIVE), "j0"]],
    );
  } finally {
    d.stop();
  }
});

test("config: defaults to shared; options of other modes are refused with their names", () => {
  assert.deepEqual(readDispatchConfig(new EnvReader({})), { mode: "shared" });
  const r = new EnvReader({ SHOAL_DISPATCH: "round-robin", SHOAL_DISPATCH_COUNT_OWN: "1", SHOAL_DISPATCH_REFRESH_MS: "50" });
  readDispatchConfig(r);
  assert.throws(
    () => r.done({}),
    /SHOAL_DISPATCH_REFRESH_MS: only applies with[\s\S]*SHOAL_DISPATCH_COUNT_OWN: only applies with SHOAL_DISPATCH=least-loaded /,
  );
  const bad = new EnvReader({ SHOAL_DISPATCH: "fastest" });
  readDispatchConfig(bad);
  assert.throws(() => bad.done({}), /SHOAL_DISPATCH=fastest: expected one of shared, partition, round-robin/);
  const ll = new EnvReader({ SHOAL_DISPATCH: "least-loaded", SHOAL_DISPATCH_REFRESH_MS: "0", SHOAL_DISPATCH_COUNT_OWN: "0", SHOAL_DISPATCH_TIES: "random" });
  assert.deepEqual(ll.done({ c: readDispatchConfig(ll) }).c, {
    mode: "least-loaded",
    refreshMs: 0,
    countOwnSends: false,
    keepOwnSends: false,
    ties: "random",
    metric: "pending-tokens",
  });
});
