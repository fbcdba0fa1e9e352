import assert from "node:assert/strict";
import { test } from "node:test";
import { kneeOf, loadPoint, nextKneeProbe } from "./dispatch-analysis.ts";
import { parseArms } from "./dispatch-arms.ts";
import { twinKnees, type ArmResult } from "./dispatch-report.ts";

test("a request's latency is its slowest call; an unanswered call fails the request", () => {
  const jobs = [
    { request: 0, arrivalMs: 0 },
    { request: 0, arrivalMs: 0 },
    { request: 1, arrivalMs: 10 },
  ];
  const p = loadPoint(0.5, jobs, [5, 30, 8], 1_000);
  assert.equal(p.requestP99Ms, 30);
  assert.equal(p.requestP50Ms, 8);
  assert.equal(p.throughputJobsPerSecond, 3);
  const lost = loadPoint(0.5, jobs, [5, undefined, 8], 1_000);
  assert.equal(lost.answeredFraction, 2 / 3);
  assert.equal(lost.requestP99Ms, Number.POSITIVE_INFINITY);
});

test("the knee is the last passing load before the first failure", () => {
  const at = (load: number, p99: number) => ({ load, jobs: 100, answeredFraction: 1, requestP50Ms: 1, requestP99Ms: p99, throughputJobsPerSecond: load * 100 });
  const points = [at(0.7, 90), at(0.3, 10), at(0.5, 20), at(0.9, 15)];
  assert.deepEqual(kneeOf(points, 50), { load: 0.5, goodputJobsPerSecond: 50 });
  assert.deepEqual(kneeOf(points, 5), { load: 0, goodputJobsPerSecond: 0 });
});

test("a knee is narrowed down between the knee and the first failure above it, or stepped up to a ceiling", () => {
  const at = (load: number, p99: number) => ({ load, jobs: 100, answeredFraction: 1, requestP50Ms: 1, requestP99Ms: p99, throughputJobsPerSecond: load * 100 });
  // Knee 1.2 (1.6 fails): try 1.4; then 1.3 once 1.4 failed; then 1.35 once 1.3 passed.
  const grid = [at(0.8, 10), at(1.2, 40), at(1.6, 90), at(2, 200)];
  assert.equal(nextKneeProbe(grid, 50, 2), 1.4);
  assert.equal(nextKneeProbe([...grid, at(1.4, 60)], 50, 2), 1.3);
  assert.equal(nextKneeProbe([...grid, at(1.4, 60), at(1.3, 45)], 50, 2), 1.35);
  // A bracket 0.05 wide is narrow enough.
  assert.equal(nextKneeProbe([at(1.3, 40), at(1.35, 60)], 50, 2), undefined);
  assert.equal(nextKneeProbe([at(1.3, 40), at(1.4, 60)], 50, 2), 1.35);
  // A pass above a failure does not count (the knee stays below the first failure): 0.8 to 1.2.
  assert.equal(nextKneeProbe([at(0.8, 10), at(1.2, 60), at(1.6, 40)], 50, 2), 1);
  // The first load fails: between 0 and it.
  assert.equal(nextKneeProbe([at(0.8, 60)], 50, 2), 0.4);
  // No failure: a quarter up, within the ceiling, then nothing.
  assert.equal(nextKneeProbe([at(0.8, 10), at(1.6, 40)], 50, 4), 2);
  assert.equal(nextKneeProbe([at(0.8, 10), at(1.6, 40)], 50, 1.8), 1.8);
  assert.equal(nextKneeProbe([at(0.8, 10), at(1.6, 40)], 50, 1.6), undefined);
});

test("a DES twin's knee counts its twin-only probes beside the twins of the live points", () => {
  const at = (load: number, p99: number) => ({ load, jobs: 100, answeredFraction: 1, requestP50Ms: 1, requestP99Ms: p99, throughputJobsPerSecond: load * 100 });
  const point = (load: number, twinP99: number) => ({
    live: at(load, 1_000),
    twin: { ...at(load, twinP99), load: 0 },
    busy: 0.5,
    twinBusy: 0.5,
    usefulTokenFraction: 1,
    twinUsefulTokenFraction: 1,
  });
  const arm: ArmResult = {
    name: "share-model",
    family: "share-model",
    routed: false,
    pathMs: 5,
    points: [point(0.8, 20), point(1.6, 40)],
    worstLag: 0,
    lagVerdicts: [],
  };
  const slos = [{ k: 10, ms: 50 }];
  // The twin passed both live loads: its knee is the highest of them, until probes above say more.
  assert.deepEqual(twinKnees(arm, slos), [{ load: 1.6, goodputJobsPerSecond: 160 }]);
  const probed = { ...arm, twinProbes: [at(2, 45), at(2.2, 60), at(2.1, 48)] };
  assert.deepEqual(twinKnees(probed, slos), [{ load: 2.1, goodputJobsPerSecond: 210 }]);
});

test("arms: routed ones carry SHOAL_DISPATCH, their options and a twin of the same policy", () => {
  const [share, group, ll] = parseArms("share,group,least-loaded@SHOAL_DISPATCH_REFRESH_MS=50+SHOAL_DISPATCH_TIES=random", 3);
  assert.equal(share!.twin.kind, "shared");
  assert.equal(group!.partitions, 6);
  assert.deepEqual(ll!.gatewayEnv, { SHOAL_DISPATCH: "least-loaded", SHOAL_DISPATCH_REFRESH_MS: "50", SHOAL_DISPATCH_TIES: "random" });
  assert.equal(ll!.workerEnv["SHOAL_STATUS_INTERVAL_MS"], "50");
  assert.equal(ll!.twin.name, "least-loaded R=50ms +own rand");
  assert.throws(() => parseArms("fastest", 2), /unknown arm 'fastest'/);
});

test("arms on a dilated run: a routed arm's refresh and status intervals are in device time, stretched like the device's costs", () => {
  const [ll, p2c, rr] = parseArms("least-loaded@SHOAL_DISPATCH_REFRESH_MS=50,p2c@SHOAL_DISPATCH_REFRESH_MS=0,round-robin", 3, 40);
  assert.equal(ll!.gatewayEnv["SHOAL_DISPATCH_REFRESH_MS"], "2000");
  assert.equal(ll!.workerEnv["SHOAL_STATUS_INTERVAL_MS"], "2000");
  assert.equal(ll!.twin.name, "least-loaded R=2000ms +own first");
  // A board read before every job: as fresh as the workers' status, 20 ms of device time at the least.
  assert.equal(p2c!.gatewayEnv["SHOAL_DISPATCH_REFRESH_MS"], "0");
  assert.equal(p2c!.workerEnv["SHOAL_STATUS_INTERVAL_MS"], "800");
  // The twin's board is as stale as the live one: the devices publish on the workers' interval.
  assert.equal(p2c!.statusMs, 800);
  assert.equal(ll!.statusMs, 2000);
  // The status interval stretched too (SIE's early router pushes every 200 ms of its device's time).
  assert.equal(rr!.workerEnv["SHOAL_STATUS_INTERVAL_MS"], "8000");
  assert.equal(rr!.gatewayEnv["SHOAL_DISPATCH_REFRESH_MS"], undefined); // round robin reads no board
});
