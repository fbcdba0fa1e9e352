import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { test } from "node:test";
import { pino } from "pino";
import { Registry } from "prom-client";
import { checkPoolLimits, limitsFromConfigs, poolNeeds, type PoolShape } from "./limit-check.ts";
import { createPoolLimitMonitor, shareLimitsReader, type ShareLimitsReader } from "./pool-limits-monitor.ts";

const values = (o: Record<string, string>) => new Map(Object.entries(o).map(([k, v]) => [k, { value: v }]));

const NINE_MODELS: PoolShape = { pool: "gpu", group: "shoal-pool-gpu", layout: "per-model", lanes: 2, models: 9, partitions: 1 };

test("limitsFromConfigs: the strictest broker binds, the group's own lock limit wins over the brokers' default", () => {
  const brokers = new Map([
    [1, values({ "group.share.max.size": "500", "group.share.max.share.sessions": "3000", "group.share.partition.max.record.locks": "2000" })],
    [2, values({ "group.share.max.size": "400", "group.share.max.share.sessions": "5000" })],
  ]);
  const limits = limitsFromConfigs(brokers, values({ "share.partition.max.record.locks": "3500" }));
  assert.equal(limits.maxGroupSize, 400);
  assert.equal(limits.maxShareSessions, 3_000);
  assert.equal(limits.partitionMaxRecordLocks, 3_500);
  assert.equal(limits.maxPartitionMaxRecordLocks, 4_000, "not reported: Kafka 4.4's default");
  assert.equal(limits.brokers, 2);
  assert.equal(limitsFromConfigs(brokers).partitionMaxRecordLocks, 2_000, "no group value: the brokers'");
});

test("a per-model pool of 12 declared workers needs 228 members: the warning names group.share.max.size", () => {
  const limits = limitsFromConfigs(new Map([[1, values({})]]));
  const warnings = checkPoolLimits(limits, { ...NINE_MODELS, declaredWorkers: 12 });
  assert.equal(warnings.length, 1);
  const [w] = warnings;
  assert.equal(w?.setting, "group.share.max.size");
  assert.equal(w?.needed, 228, "12 × (9 models × 2 lanes + retry)");
  assert.equal(w?.limit, 200);
  assert.match(w!.message, /12 workers declared .* 19 share-group members each .* workers past 10 cannot join/);
  assert.deepEqual(checkPoolLimits(limits, { ...NINE_MODELS, declaredWorkers: 10 }), [], "190 members fit");
});

test("a group one worker short of its member limit is reported, observed workers standing in for a declared size", () => {
  const limits = limitsFromConfigs(new Map([[1, values({})]]));
  const warnings = checkPoolLimits(limits, { ...NINE_MODELS, members: 190, workers: 10 });
  assert.deepEqual(
    warnings.map((w) => [w.setting, w.needed]),
    [["group.share.max.size", 209]],
  );
  assert.match(warnings[0]!.message, /has 190 of 200 members; one more worker \(19 members\) would be refused/);
});

test("share sessions per broker: 200 workers of a one-partition per-lane pool on one broker", () => {
  const shape: PoolShape = { pool: "p", group: "shoal-pool-p", layout: "per-lane", lanes: 2, models: 3, partitions: 1, declaredWorkers: 200 };
  assert.equal(poolNeeds(shape, 200, 1).sessionsPerBroker, 600, "3 topics × 200 members, all led by the one broker");
  assert.equal(poolNeeds(shape, 200, 3).sessionsPerBroker, 200, "three brokers lead one topic each");
  const limits = limitsFromConfigs(new Map([[1, values({ "group.share.max.share.sessions": "500", "group.share.max.size": "1000" })]]));
  const warnings = checkPoolLimits(limits, shape);
  assert.deepEqual(
    warnings.map((w) => [w.setting, w.needed, w.limit]),
    [["group.share.max.share.sessions", 600, 500]],
  );
});

test("the monitor warns once per shortfall, sets the headroom gauges, and says when the pool fits again", async () => {
  const lines: Array<{ level: number; msg: string; setting?: string }> = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    }),
  );
  let members = 190;
  const reader: ShareLimitsReader = shareLimitsReader({
    describeBrokerConfigs: async () => new Map([[1, values({ "group.share.max.size": "200" })]]),
    describeGroupConfigs: async (ids) => new Map(ids.map((id) => [id, values({ "share.partition.max.record.locks": "3000" })])),
    describeShareGroup: async () => ({ members: Array.from({ length: members }, (_, i) => ({ clientId: `shoal-worker-w${Math.floor(i / 19)}-${i % 19}` })) }),
  });
  const registry = new Registry();
  const monitor = createPoolLimitMonitor({ reader, pools: [NINE_MODELS], registry, logger, held: () => 7 });
  assert.equal((await monitor.check()).length, 1);
  assert.equal((await monitor.check()).length, 1);
  const warned = lines.filter((l) => l.level === 40 && l.setting === "group.share.max.size");
  assert.equal(warned.length, 1, "the second check does not repeat the warning");
  const text = await registry.metrics();
  assert.match(text, /shoal_share_group_members\{pool="gpu"\} 190/);
  assert.match(text, /shoal_share_group_members_limit\{pool="gpu"\} 200/);
  assert.match(text, /shoal_share_group_members_per_worker\{pool="gpu"\} 19/);
  assert.match(text, /shoal_share_record_locks_limit\{pool="gpu"\} 3000/);
  assert.match(text, /shoal_share_held_records\{pool="gpu"\} 7/);
  assert.match(text, /shoal_share_limit_warning\{pool="gpu",setting="group.share.max.size"\} 1/);
  members = 19;
  assert.deepEqual(await monitor.check(), []);
  assert.match(await registry.metrics(), /shoal_share_limit_warning\{pool="gpu",setting="group.share.max.size"\} 0/);
  assert.ok(lines.some((l) => l.msg === "the pool fits this Kafka limit again"));
});

test("the monitor survives a broker that cannot be read: logged, no warning, no throw", async () => {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    }),
  );
  const fail = async (): Promise<never> => {
    throw new Error("connection refused");
  };
  const monitor = createPoolLimitMonitor({
    reader: { brokerConfigs: fail, groupConfigs: fail, groupMembers: fail },
    pools: [NINE_MODELS],
    registry: new Registry(),
    logger,
  });
  assert.deepEqual(await monitor.start(), []);
  assert.ok(lines.some((l) => /could not read the brokers' share-group limits/.test(l.msg)));
});
