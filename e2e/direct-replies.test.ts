import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, describe, test } from "node:test";
import { Kafka, logLevel } from "kafkajs";
import { kafkaBrokers, startCluster, type TestCluster, workerMetricsUrl } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * Direct replies (issue #17): a worker hands each result straight to the gateway holding the call,
 * at the address the gateway's registration on shoal.gateways gives, and falls back to the
 * gateway's reply topic whenever it cannot. The reply topic's record count tells the two paths
 * apart: nothing is written to it on the direct path, every result on the fallback.
 */
describe("direct replies: results skip the reply topic, which stays the fallback", () => {
  const clusters: TestCluster[] = [];
  after(async () => {
    for (const c of clusters) await c.stop();
  });

  const topicRecords = async (topic: string): Promise<number> => {
    const admin = new Kafka({ clientId: "e2e-direct", brokers: [kafkaBrokers()], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      return (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  };

  /** Sends `n` one-text calls, 4 at a time; returns how many were answered with a vector. */
  async function embedMany(cluster: TestCluster, n: number): Promise<number> {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    let answered = 0;
    for (let i = 0; i < n; i += 4) {
      const batch = Array.from({ length: Math.min(4, n - i) }, (_, j) => inference.embed({ model: cluster.modelIds[0]!, inputs: [`direct reply ${i + j}`] }));
      for (const r of await Promise.all(batch)) if (r.embeddings[0]!.values.length > 0) answered++;
    }
    return answered;
  }

  async function counters(cluster: TestCluster) {
    const g = await scrape(`${cluster.urls[0]}/metrics`);
    const w = await scrape(await workerMetricsUrl(cluster.workers[0]!));
    return {
      gatewayDirect: total(g, "shoal_gateway_direct_results_total"),
      sentDirect: total(w, "shoal_worker_results_sent_total", { via: "direct" }),
      sentTopic: total(w, "shoal_worker_results_sent_total", { via: "topic" }),
      fallbacks: total(w, "shoal_worker_direct_reply_fallbacks_total"),
    };
  }

  test("by default every result is handed straight to the gateway: 40 calls answered, 0 records on its reply topic", async () => {
    const cluster = await startCluster({ gateways: 1, workers: 1 });
    clusters.push(cluster);
    const topic = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]);
    const records0 = await topicRecords(topic);
    const before = await counters(cluster);
    assert.equal(await embedMany(cluster, 40), 40);
    const after = await counters(cluster);
    const records = (await topicRecords(topic)) - records0;
    console.log(
      `direct: ${after.gatewayDirect - before.gatewayDirect} results taken directly, ${records} on the reply topic, ${after.fallbacks - before.fallbacks} fallbacks`,
    );
    assert.equal(after.sentDirect - before.sentDirect, 40, "the worker handed all 40 results directly");
    assert.equal(after.gatewayDirect - before.gatewayDirect, 40, "the gateway took all 40");
    assert.equal(records, 0, "nothing went through the reply topic");
    assert.equal(after.fallbacks - before.fallbacks, 0);
  });

  test("a direct address nobody listens on: every result falls back to the reply topic, 40 of 40 answered", async () => {
    // A port bound and released: connections to it are refused.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const cluster = await startCluster({ gateways: 1, workers: 1, gatewayEnv: { SHOAL_DIRECT_REPLY_ADVERTISE: `127.0.0.1:${port}` } });
    clusters.push(cluster);
    const topic = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]);
    const records0 = await topicRecords(topic);
    const before = await counters(cluster);
    assert.equal(await embedMany(cluster, 40), 40);
    const after = await counters(cluster);
    const records = (await topicRecords(topic)) - records0;
    console.log(
      `unreachable direct address: ${records} results on the reply topic, ${after.fallbacks - before.fallbacks} fallbacks, ${after.gatewayDirect - before.gatewayDirect} taken directly`,
    );
    assert.equal(after.gatewayDirect - before.gatewayDirect, 0);
    assert.equal(after.sentTopic - before.sentTopic, 40, "all 40 through the reply topic");
    assert.equal(records, 40);
    assert.equal(after.fallbacks - before.fallbacks, 40, "each result counted as a fallback (unreachable, then paused)");
  });
});
