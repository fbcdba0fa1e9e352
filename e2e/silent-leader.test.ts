/**
 * A partition leader that goes silent (a network partition: packets dropped, no connection
 * refused) must not stop Shoal's producers for longer than it takes Kafka to move leadership and
 * the producer to notice. kafkajs's producer never refreshes its metadata after a request timeout,
 * so without help it keeps writing to the silent broker until that broker answers again; the
 * batching producer (gateway jobs, worker results) starts a new producer after a timed-out
 * request, and, given `stuckAfterMs`, as soon as a request has waited that long (the gateway's
 * job producer and the worker's result producer do). Three Kafka hosts in network namespaces (see
 * harness/netns.ts), the producer in the root namespace, the gateway's producer settings.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { createBatchingProducer, createKafka, createLogger } from "@shoal/common";
import type { Admin } from "kafkajs";
import { createNetLab, netnsProblem, type Host, type NetLab } from "./harness/netns.ts";
import { until } from "./harness/wait.ts";
import { startNetnsKafka, type NetnsKafka } from "./harness/netns-kafka.ts";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const problem = await netnsProblem();

describe("a silent partition leader (network partition, 3 brokers)", { skip: problem === undefined ? false : `skipped: ${problem}` }, () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c().catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
  });

  /**
   * Creates a topic and waits until every partition has a leader. kafkajs' own `waitForLeaders`
   * gives up on UNKNOWN_TOPIC_OR_PARTITION, which a broker healed a few seconds earlier (the test
   * before) answers until its metadata catches up; this asks again.
   */
  async function createTopic(admin: Admin, topic: string, numPartitions: number): Promise<void> {
    // kafkajs' own wait (waitForLeaders, on by default) would throw on that answer first.
    await admin.createTopics({ topics: [{ topic, numPartitions }], waitForLeaders: false });
    await until(`${topic} has a leader for each of its ${numPartitions} partitions`, async () => {
      const md = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      const partitions = md?.topics[0]?.partitions ?? [];
      return partitions.length === numPartitions && partitions.every((p) => p.leader >= 0);
    });
  }

  let lab: NetLab | undefined;
  let cluster: { kafka: NetnsKafka; hosts: Host[] } | undefined;
  async function kafkaHosts(): Promise<{ kafka: NetnsKafka; hosts: Host[] }> {
    if (cluster) return cluster;
    lab = await createNetLab();
    const l = lab;
    cleanup.push(() => l.destroy());
    const hosts = [await lab.addHost("kafka1"), await lab.addHost("kafka2"), await lab.addHost("kafka3")];
    const kafka = await startNetnsKafka(hosts);
    cleanup.push(() => kafka.stop());
    cluster = { kafka, hosts };
    return cluster;
  }

  /**
   * 10 records a second, each given up after 3 s (the gateway's ack timeout), for 5 + 25 + 5 s; the
   * broker leading the most partitions of a fresh topic is cut off for the 25 s.
   */
  async function cutTheLeader(name: string, settings: { requestTimeoutMs: number; stuckAfterMs?: number }) {
    const { kafka: kafkaCluster, hosts } = await kafkaHosts();
    const logger = createLogger("silent-leader-test", "error");
    const kafka = createKafka(
      { brokers: kafkaCluster.brokers.split(","), clientId: name, ssl: false, connectionTimeoutMs: 1_000, requestTimeoutMs: settings.requestTimeoutMs },
      logger,
    );
    const admin = kafka.admin();
    await admin.connect();
    cleanup.push(() => admin.disconnect());
    const topic = `jobs-${name}`;
    await createTopic(admin, topic, 6);
    // The gateway's job producer settings (services/gateway/src/job-producer.ts).
    const producer = createBatchingProducer(kafka, logger, {
      name,
      retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
      ...(settings.stuckAfterMs !== undefined ? { stuckAfterMs: settings.stuckAfterMs } : {}),
    });
    await producer.connect();
    cleanup.push(() => producer.disconnect());

    const t0 = performance.now();
    const acked: number[] = [];
    let failed = 0;
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop && i < 400; i++) {
        const timeout = sleep(3_000).then(() => Promise.reject(new Error("not acknowledged within 3 s")));
        void Promise.race([producer.send(topic, { key: `k${i}`, value: `record ${i}` }), timeout]).then(
          () => acked.push(performance.now() - t0),
          () => (failed += 1),
        );
        await sleep(100);
      }
    })();
    await sleep(5_000);
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const leaders = (md.topics[0]?.partitions ?? []).map((p) => p.leader);
    // The node leading the most partitions, but not the active KRaft controller: cutting the
    // controller too is a compound failure (a controller election before any broker is fenced),
    // which once left no leader moved for the whole 25 s cut in CI (2026-12-05); it is not what this
    // test measures.
    const controller = await kafkaCluster.activeController();
    const leading = (id: number): number => leaders.filter((l) => l === id).length;
    const candidates = kafkaCluster.ids.filter((id) => id !== controller && leading(id) > 0);
    const victimId = [...(candidates.length > 0 ? candidates : kafkaCluster.ids)].sort((a, b) => leading(b) - leading(a))[0]!;
    const victim = hosts[kafkaCluster.ids.indexOf(victimId)]!;
    const cutAt = performance.now() - t0;
    await lab!.isolate(victim);
    await sleep(25_000);
    const healAt = performance.now() - t0;
    await lab!.heal(victim);
    await sleep(5_000);
    stop = true;
    await load;
    await sleep(3_500);

    // Acknowledged in the last 10 s of the cut: the producer found the new leaders without the old one's help.
    const lateInCut = acked.filter((t) => t >= healAt - 10_000 && t < healAt).length;
    const firstAfterCut = acked.find((t) => t > cutAt + 3_000);
    // The longest time without any acknowledgement, from the cut to the heal.
    const inCut = [cutAt, ...acked.filter((t) => t > cutAt && t < healAt), healAt];
    const gapMs = Math.max(...inCut.slice(1).map((t, i) => t - inCut[i]!));
    console.log(
      `silent leader (${name}: request timeout ${settings.requestTimeoutMs} ms, stuck after ${settings.stuckAfterMs ?? "-"} ms): cut broker ${victimId} (led ${leading(victimId)}/6; active controller ${controller ?? "unknown"}); ` +
        `longest gap without an ack ${(gapMs / 1000).toFixed(1)} s; ${lateInCut} records acknowledged in the last 10 s of the cut; ${acked.length} acknowledged, ${failed} given up`,
    );
    // A shortfall is read from the brokers' side (a follower fallen behind answers NOT_ENOUGH_REPLICAS).
    if (lateInCut < 50) process.stderr.write(`${await kafkaCluster.warnings()}\n`);
    return { lateInCut, firstAfterCut, gapMs };
  }

  test("the batching producer writes again while the old leader is still cut off (2 s request timeout)", { timeout: 180_000 }, async () => {
    const { lateInCut } = await cutTheLeader("timeout", { requestTimeoutMs: 2_000 });
    assert.ok(lateInCut >= 50, `records are acknowledged while the old leader is still cut off (${lateInCut} in the last 10 s of the cut)`);
  });

  test("with the default 10 s request timeout, a stuck bound (3 s) brings writes back within seconds", { timeout: 180_000 }, async () => {
    const { lateInCut, gapMs } = await cutTheLeader("stuck", { requestTimeoutMs: 10_000, stuckAfterMs: 3_000 });
    assert.ok(lateInCut >= 50, `records are acknowledged while the old leader is still cut off (${lateInCut} in the last 10 s of the cut)`);
    // Kafka fences the silent broker after 3 s (broker.session.timeout.ms); one or two 3 s bounds follow.
    assert.ok(gapMs < 9_000, `longest gap without an acknowledgement: ${(gapMs / 1000).toFixed(1)} s`);
  });

  test("a producer replaced while every broker is out of reach connects again once they return", { timeout: 180_000 }, async () => {
    const { kafka: kafkaCluster, hosts } = await kafkaHosts();
    const logger = createLogger("silent-leader-test", "error");
    const kafka = createKafka(
      { brokers: kafkaCluster.brokers.split(","), clientId: "all-cut", ssl: false, connectionTimeoutMs: 1_000, requestTimeoutMs: 5_000 },
      logger,
    );
    const topic = "jobs-all-cut";
    const admin = kafka.admin();
    await admin.connect();
    cleanup.push(() => admin.disconnect());
    await createTopic(admin, topic, 3);
    const producer = createBatchingProducer(kafka, logger, {
      name: "all-cut",
      retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 },
      stuckAfterMs: 3_000,
    });
    await producer.connect();
    cleanup.push(() => producer.disconnect());
    const send = (i: number): Promise<boolean> =>
      Promise.race([producer.send(topic, { key: `k${i}`, value: `record ${i}` }).then(() => true), sleep(3_000).then(() => false)]).catch(() => false);
    assert.equal(await send(0), true);
    // Every broker out of reach: the request in flight is stuck, the new producer cannot connect.
    for (const h of hosts) await lab!.isolate(h);
    const during: boolean[] = [];
    for (let i = 1; i <= 8; i++) during.push(await send(i));
    for (const h of hosts) await lab!.heal(h);
    const healedAt = performance.now();
    let firstOk: number | undefined;
    for (let i = 100; i < 160 && firstOk === undefined; i++) {
      if (await send(i)) firstOk = performance.now() - healedAt;
      else await sleep(500);
    }
    console.log(
      `all brokers cut: ${during.filter(Boolean).length}/8 acknowledged during the cut; first acknowledgement ${firstOk === undefined ? "never" : `${(firstOk / 1000).toFixed(1)} s`} after the heal`,
    );
    assert.equal(during.filter(Boolean).length, 0, "nothing is acknowledged while every broker is out of reach");
    assert.ok(firstOk !== undefined && firstOk < 30_000, "the replacement producer connects and writes once the brokers are back");
  });
});
