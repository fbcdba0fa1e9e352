import assert from "node:assert/strict";
import { test } from "node:test";
import { bindingLimit, fitConfiguration, limitUses } from "./capacity-fit.ts";
import { capacityReport, deviceFigures, membersPerWorker, shardModels, splitWorkers, type CapacityInput } from "./capacity-model.ts";
import { KAFKA_44 } from "./kafka-limits.ts";

/** Round numbers, checked by hand below. */
const SMALL: CapacityInput = {
  workers: 4,
  models: [{ id: "m", jobShare: 1, tokenShare: 1 }],
  lanes: 2,
  layout: "per-lane",
  meanJobTokens: 500,
  deviceTokensPerSecond: 1_000_000,
  utilisation: 1,
  busiestLaneShare: 1,
  batchTokens: 10_000,
  idleTakeTokens: 20_000,
  ackDelayMs: 90,
  ackLingerMs: 100,
  idleWaitMs: 100,
  laterIdleWaitMs: 2_000,
  heartbeatIntervalMs: 5_000,
  brokers: 3,
  partitions: 1,
  groups: 1,
};

test("one accelerator: jobs/s, how long a job stays locked, and its locks by Little's law", () => {
  // 1,000,000 tokens/s ÷ 500 = 2,000 jobs/s; held 10,000 / 1e6 s = 10 ms computing + 90 ms acking = 100 ms;
  // 2,000 × 0.1 s = 200 locked, plus an idle take of 20,000 / 500 = 40 jobs: 240.
  const d = deviceFigures(SMALL);
  assert.equal(d.jobsPerSecond, 2_000);
  assert.equal(d.heldMs, 100);
  assert.equal(d.recordsPerTake, 40);
  assert.equal(d.locks, 240);
  assert.equal(deviceFigures({ ...SMALL, utilisation: 0.5 }).locks, 140, "half the load: 1,000 × 0.1 + 40");
});

test("members per worker follow the layout: a member per jobs topic and one for the retry topic", () => {
  assert.equal(membersPerWorker("per-lane", 2, 9), 3);
  assert.equal(membersPerWorker("per-model", 2, 9), 19);
  assert.equal(membersPerWorker("per-model", 2, 1), 3);
});

test("four workers on one per-lane pool: members, locks, sessions, heartbeats and fetches", () => {
  const r = capacityReport(SMALL);
  assert.equal(r.totalMembers, 12, "4 workers × 3 members");
  assert.equal(r.maxMembersPerGroup, 12);
  assert.equal(r.maxLocksPerPartition, 960, "4 × 240 on the interactive topic's one partition");
  // Three one-partition topics, their leaders on three brokers: each broker has one topic's 4 members.
  assert.equal(r.totalSessions, 12);
  assert.equal(r.maxSessionsPerBroker, 4);
  assert.equal(r.heartbeatsPerSecond, 2.4, "12 members every 5 s");
  // Idle: the interactive topic's 4 waits of 100 ms (40/s), the retry and batch topics' of 2 s (2/s each).
  assert.equal(r.idleFetchesPerSecond, 44);
  assert.equal(r.maxIdleFetchesPerBroker, 40);
  assert.equal(r.takeFetchesPerSecond, 200, "8,000 jobs/s in takes of 40");
  assert.equal(r.stateWritesPerSecond, 40, "4 members acking the interactive topic at most every 100 ms");
});

test("more partitions than members: each member holds a session on every broker leading one of its partitions", () => {
  const r = capacityReport({ ...SMALL, workers: 2, partitions: 6 });
  // 2 members, 6 partitions: 3 partitions each, on 3 brokers: 6 sessions a topic, 18 in all, 6 a broker.
  assert.equal(r.totalSessions, 18);
  assert.equal(r.maxSessionsPerBroker, 6);
  assert.equal(r.maxLocksPerPartition, 80, "2 × 240 ÷ 6");
});

test("shardModels puts the heaviest models on the lightest pool; splitWorkers keeps every pool staffed", () => {
  const models = [
    { id: "c", jobShare: 0.2, tokenShare: 0.2 },
    { id: "a", jobShare: 0.5, tokenShare: 0.5 },
    { id: "b", jobShare: 0.3, tokenShare: 0.3 },
  ];
  assert.deepEqual(
    shardModels(models, 2).map((g) => g.map((m) => m.id)),
    [["a"], ["b", "c"]],
  );
  assert.deepEqual(splitWorkers(10, [0.5, 0.5]), [5, 5]);
  assert.deepEqual(splitWorkers(7, [0.6, 0.3, 0.1]), [4, 2, 1]);
  assert.deepEqual(splitWorkers(2, [0.98, 0.01, 0.01]), [1, 1, 1], "at least one each, even past the total");
});

test("limitUses: the record-lock limit binds first, at 8 workers of 240 locks on one 2,000-lock partition", () => {
  const uses = limitUses({ ...SMALL, workers: 20 });
  const byName = new Map(uses.map((u) => [u.limit.name, u]));
  assert.equal(byName.get(KAFKA_44.maxGroupSize.name)?.maxWorkers, 66, "200 members ÷ 3");
  assert.equal(byName.get(KAFKA_44.groupPartitionMaxRecordLocks.name)?.maxWorkers, 8, "2,000 ÷ 240");
  assert.equal(byName.get(KAFKA_44.maxShareSessions.name)?.maxWorkers, 2_000, "a session per member on its topic's leader");
  assert.equal(byName.get(KAFKA_44.groupPartitionMaxRecordLocks.name)?.fits, false);
  assert.equal(bindingLimit(uses).limit, KAFKA_44.groupPartitionMaxRecordLocks);
});

test("fitConfiguration: 20 workers need 2 partitions and a group lock limit of 3,000, no broker change", () => {
  // 20 × 240 = 4,800 locks; at 80% of 4,000 per partition: 2 partitions of 2,400; 2,400 ÷ 0.8 = 3,000.
  const fit = fitConfiguration({ ...SMALL, workers: 20 });
  assert.ok(fit);
  assert.equal(fit.input.groups, 1);
  assert.deepEqual(fit.input.partitions, [2]);
  assert.deepEqual(fit.group, { [KAFKA_44.groupPartitionMaxRecordLocks.name]: 3_000 });
  assert.deepEqual(fit.broker, {});
  assert.equal(fit.report.maxSessionsPerBroker, 20, "6 partition leaders over 3 brokers, 10 members each");
  assert.deepEqual(fit.notes, []);
});

test("fitConfiguration shards models over pools once one group would pass 1,000 members", () => {
  const models = Array.from({ length: 4 }, (_, i) => ({ id: `m${i}`, jobShare: 0.25, tokenShare: 0.25 }));
  // 400 workers × 3 members = 1,200 > 1,000: two pools of 200 workers, 600 members each.
  const fit = fitConfiguration({ ...SMALL, workers: 400, models, utilisation: 0.01, idleTakeTokens: 500 });
  assert.ok(fit);
  assert.equal(fit.input.groups, 2);
  assert.deepEqual(
    fit.report.groups.map((g) => g.members),
    [600, 600],
  );
  assert.equal(fit.broker[KAFKA_44.maxGroupSize.name], 750, "600 ÷ 0.8");
});
