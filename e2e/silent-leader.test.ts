/**
 * A partition leader that goes silent (a network partition: packets dropped, no connection
 * refused) must not stop Shoal's producers for longer than it takes Kafka to move leadership and
 * the producer to notice. kafkajs's producer never refreshes its metadata after a request timeout,
 * so without help it keeps writing to the silent broker until that broker answers again; the
 * batching producer (gateway jobs, worker results) starts a new producer after a timed-out
 * request. Three Kafka hosts in network namespaces (see harness/netns.ts), the producer in the
 * root namespace, the gateway's producer settings, a 2 s request timeout.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { createBatchingProducer, createKafka, createLogger } from "@shoal/common";
import { createNetLab, netnsProblem, type NetLab } from "./harness/netns.ts";
import { startNetnsKafka } from "./harness/netns-kafka.ts";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const problem = await netnsProblem();

describe("a silent partition leader (network partition, 3 brokers)", { skip: problem === undefined ? false : `skipped: ${problem}` }, () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c().catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
  });

  test("the batching producer writes again while the old leader is still cut off", { timeout: 180_000 }, async () => {
    const lab: NetLab = await createNetLab();
    cleanup.push(() => lab.destroy());
    const hosts = [await lab.addHost("kafka1"), await lab.addHost("kafka2"), await lab.addHost("kafka3")];
    const kafkaCluster = await startNetnsKafka(hosts);
    cleanup.push(() => kafkaCluster.stop());
    const logger = createLogger("silent-leader-test", "error");
    const kafka = createKafka(
      { brokers: kafkaCluster.brokers.split(","), clientId: "silent-leader", ssl: false, connectionTimeoutMs: 1_000, requestTimeoutMs: 2_000 },
      logger,
    );
    const admin = kafka.admin();
    await admin.connect();
    cleanup.push(() => admin.disconnect());
    await admin.createTopics({ topics: [{ topic: "jobs", numPartitions: 6 }] });
    // The gateway's job producer settings (services/gateway/src/job-producer.ts).
    const producer = createBatchingProducer(kafka, logger, { name: "silent-leader", retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 } });
    await producer.connect();
    cleanup.push(() => producer.disconnect());

    // 10 records a second, each given up after 3 s (the gateway's ack timeout), for 5 + 25 + 5 s.
    const t0 = performance.now();
    const acked: number[] = [];
    let failed = 0;
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop && i < 400; i++) {
        const timeout = sleep(3_000).then(() => Promise.reject(new Error("not acknowledged within 3 s")));
        void Promise.race([producer.send("jobs", { key: `k${i}`, value: `record ${i}` }), timeout]).then(
          () => acked.push(performance.now() - t0),
          () => (failed += 1),
        );
        await sleep(100);
      }
    })();
    await sleep(5_000);
    // Cut off the broker leading the most partitions.
    const md = await admin.fetchTopicMetadata({ topics: ["jobs"] });
    const leaders = (md.topics[0]?.partitions ?? []).map((p) => p.leader);
    const victimId = [...kafkaCluster.ids].sort((a, b) => leaders.filter((l) => l === b).length - leaders.filter((l) => l === a).length)[0]!;
    const victim = hosts[kafkaCluster.ids.indexOf(victimId)]!;
    const cutAt = performance.now() - t0;
    await lab.isolate(victim);
    await sleep(25_000);
    const healAt = performance.now() - t0;
    await lab.heal(victim);
    await sleep(5_000);
    stop = true;
    await load;
    await sleep(3_500);

    // Acknowledged in the last 10 s of the cut: the producer found the new leaders without the old one's help.
    const lateInCut = acked.filter((t) => t >= healAt - 10_000 && t < healAt).length;
    const firstAfterCut = acked.find((t) => t > cutAt + 3_000);
    console.log(
      `silent leader: cut broker ${victimId} (led ${leaders.filter((l) => l === victimId).length}/6) at ${(cutAt / 1000).toFixed(1)} s, healed at ${(healAt / 1000).toFixed(1)} s; ` +
        `writes again ${firstAfterCut === undefined ? "never" : `${((firstAfterCut - cutAt) / 1000).toFixed(1)} s after the cut`}; ` +
        `${lateInCut} records acknowledged in the last 10 s of the cut; ${acked.length} acknowledged, ${failed} given up`,
    );
    assert.ok(lateInCut >= 50, `records are acknowledged while the old leader is still cut off (${lateInCut} in the last 10 s of the cut)`);
  });
});
