import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import http2 from "node:http2";
import { createServer } from "node:net";
import { after, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { DIRECT_REPLY_GATEWAY_HEADER, DIRECT_REPLY_PATH, encodeResult } from "@shoal/common";
import { JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
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

  /** 40 one-text calls through a new cluster with `gatewayEnv`: how their results travelled. */
  async function fortyCalls(gatewayEnv: Record<string, string>) {
    const cluster = await startCluster({ gateways: 1, workers: 1, gatewayEnv });
    clusters.push(cluster);
    const topic = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]);
    const records0 = await topicRecords(topic);
    const before = await counters(cluster);
    const answered = await embedMany(cluster, 40);
    const after = await counters(cluster);
    const moved = {
      answered,
      records: (await topicRecords(topic)) - records0,
      gatewayDirect: after.gatewayDirect - before.gatewayDirect,
      sentDirect: after.sentDirect - before.sentDirect,
      sentTopic: after.sentTopic - before.sentTopic,
      fallbacks: after.fallbacks - before.fallbacks,
    };
    console.log(`direct replies (${JSON.stringify(gatewayEnv)}): ${JSON.stringify(moved)}`);
    return moved;
  }

  test("by default every result is handed straight to the gateway: 40 calls answered, 0 records on its reply topic", async () => {
    const m = await fortyCalls({});
    assert.equal(m.answered, 40);
    assert.equal(m.sentDirect, 40, "the worker handed all 40 results directly");
    assert.equal(m.gatewayDirect, 40, "the gateway took all 40");
    assert.equal(m.records, 0, "nothing went through the reply topic");
    assert.equal(m.fallbacks, 0);
  });

  test("a direct address nobody listens on: every result falls back to the reply topic, 40 of 40 answered", async () => {
    // A port bound and released: connections to it are refused.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const m = await fortyCalls({ SHOAL_DIRECT_REPLY_ADVERTISE: `127.0.0.1:${port}` });
    assert.equal(m.answered, 40);
    assert.equal(m.gatewayDirect, 0);
    assert.equal(m.sentTopic, 40, "all 40 through the reply topic");
    assert.equal(m.records, 40);
    assert.equal(m.fallbacks, 40, "each result counted as a fallback (unreachable, then paused)");
  });

  test("with cluster keys: results signed by the worker are taken directly; an unsigned POST to the listener is refused (403) and counted", async () => {
    const key = randomBytes(32).toString("hex");
    const cluster = await startCluster({ gateways: 1, workers: 1, gatewayEnv: { SHOAL_CLUSTER_KEYS: key }, workerEnv: { SHOAL_CLUSTER_KEYS: key } });
    clusters.push(cluster);
    const address = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "taking results directly from workers"))["advertised"]);
    const instanceId = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]).slice("shoal.replies.".length);
    const before = await counters(cluster);
    assert.equal(await embedMany(cluster, 8), 8);
    const after = await counters(cluster);
    assert.equal(after.gatewayDirect - before.gatewayDirect, 8, "signed results taken directly");
    const forged = Buffer.from(encodeResult(create(JobResultSchema, { jobId: randomUUID(), status: JobStatus.OK })));
    const status = await new Promise<number>((resolve, reject) => {
      const session = http2.connect(`http://${address}`);
      session.on("error", reject);
      const req = session.request({ ":method": "POST", ":path": DIRECT_REPLY_PATH, [DIRECT_REPLY_GATEWAY_HEADER]: instanceId });
      let code = 0;
      req.on("response", (h) => (code = Number(h[":status"])));
      req.on("close", () => {
        session.close();
        resolve(code);
      });
      req.resume();
      req.end(forged);
    });
    const rejected = total(await scrape(`${cluster.urls[0]}/metrics`), "shoal_gateway_records_rejected_total", { reason: "direct_signature" });
    console.log(`direct replies with cluster keys: 8 taken directly; an unsigned POST got ${status}, direct_signature rejections ${rejected}`);
    assert.equal(status, 403);
    assert.equal(rejected, 1);
  });
});
