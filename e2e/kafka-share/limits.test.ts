/**
 * The share-group limits a pool runs into, read from a real broker (issue #53): DescribeConfigs on
 * the broker and on a share group, and the pool check that warns, naming the setting, when a
 * pool's declared size cannot fit them. The test broker's server.properties sets the heartbeat
 * interval to 1 s; the limits the check compares keep Kafka 4.4's defaults.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, afterEach, test } from "node:test";
import { pino } from "pino";
import { Registry } from "prom-client";
import { BROKER_LIMIT_NAMES, createPoolLimitMonitor, GROUP_LIMIT_NAMES, KAFKA_44, shareLimitsReader } from "@shoal/common";
import { alterShareGroupConfig, describeBrokerConfigs, describeGroupConfigs, describeShareGroup } from "@shoal/kafka-share";
import { assigned, brokers, closeAll, consumerFor, createTopic, disconnectProducer, unique } from "./helpers.ts";

afterEach(closeAll);
after(disconnectProducer);

const admin = { brokers };

test("DescribeConfigs reads every broker's share-group limits and a group's own lock limit", async () => {
  const byBroker = await describeBrokerConfigs(admin, BROKER_LIMIT_NAMES);
  assert.ok(byBroker.size >= 1);
  for (const [nodeId, values] of byBroker) {
    assert.equal(values.get(KAFKA_44.maxGroupSize.name)?.value, String(KAFKA_44.maxGroupSize.default), `broker ${nodeId}`);
    assert.equal(values.get(KAFKA_44.maxGroupSize.name)?.isDefault, true);
    assert.equal(values.get(KAFKA_44.maxShareSessions.name)?.value, String(KAFKA_44.maxShareSessions.default));
    assert.equal(values.get(KAFKA_44.partitionMaxRecordLocks.name)?.value, String(KAFKA_44.partitionMaxRecordLocks.default));
    assert.equal(values.get(KAFKA_44.maxPartitionMaxRecordLocks.name)?.value, String(KAFKA_44.maxPartitionMaxRecordLocks.default));
    // infra/kafka/server.properties.template sets it: not Kafka's default.
    assert.equal(values.get(KAFKA_44.heartbeatIntervalMs.name)?.value, "1000");
    assert.equal(values.get(KAFKA_44.heartbeatIntervalMs.name)?.isDefault, false);
  }
  const group = unique("limits");
  const before = await describeGroupConfigs(admin, [group], GROUP_LIMIT_NAMES);
  assert.equal(before.get(group)?.get(KAFKA_44.groupPartitionMaxRecordLocks.name)?.value, "2000", "a group with no settings: the brokers' default");
  await alterShareGroupConfig(admin, group, { partitionMaxRecordLocks: 3_000 });
  const set = await describeGroupConfigs(admin, [group], GROUP_LIMIT_NAMES);
  assert.equal(set.get(group)?.get(KAFKA_44.groupPartitionMaxRecordLocks.name)?.value, "3000");
});

test("a per-model pool declared at 12 workers is warned about, naming group.share.max.size; members are counted per worker", async () => {
  const topic = unique("jobs");
  await createTopic(topic);
  const group = unique("shoal-pool-limits");
  // One worker of two members, as share-intake names them: <clientId>-<i>.
  const members = [consumerFor(group, topic, { clientId: "shoal-worker-w1-0" }), consumerFor(group, topic, { clientId: "shoal-worker-w1-1" })];
  await Promise.all(members.map((m) => assigned(m)));
  const lines: Array<{ level: number; msg: string; setting?: string; needed?: number; limit?: number }> = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    }),
  );
  const registry = new Registry();
  const monitor = createPoolLimitMonitor({
    reader: shareLimitsReader({
      describeBrokerConfigs: (names) => describeBrokerConfigs(admin, names),
      describeGroupConfigs: (ids, names) => describeGroupConfigs(admin, ids, names),
      describeShareGroup: (id) => describeShareGroup(admin, id),
    }),
    pools: [{ pool: "limits", group, layout: "per-model", lanes: 2, models: 9, partitions: 1, declaredWorkers: 12 }],
    registry,
    logger,
  });
  const warnings = await monitor.start();
  monitor.stop();
  assert.deepEqual(
    warnings.map((w) => [w.setting, w.needed, w.limit]),
    [["group.share.max.size", 228, 200]],
  );
  const logged = lines.find((l) => l.level === 40 && l.setting === "group.share.max.size");
  assert.ok(logged, "logged as a warning");
  assert.match(logged.msg, /Raise group\.share\.max\.size in every broker's server\.properties/);
  const text = await registry.metrics();
  assert.match(text, /shoal_share_group_members\{pool="limits"\} 2/);
  assert.match(text, /shoal_share_group_members_limit\{pool="limits"\} 200/);
  assert.match(text, /shoal_share_record_locks_limit\{pool="limits"\} 2000/);
});
