import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { createShoalClient, type RetryInfo } from "@shoal/client";
import { jobsTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import kafkajs, { Kafka, logLevel, type Admin } from "kafkajs";
import { startScratchCluster, type ScratchCluster } from "../infra/dev/broker.ts";
import { gatewayResultCounters, repliesSince, replySnapshot } from "./harness/reply-topic.ts";
import { startCluster } from "./harness/cluster.ts";
import { maxAbsDiff } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";
import { saveLogs } from "./harness/service-process.ts";
import { eventually } from "./harness/wait.ts";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Leader, replicas and in-sync replicas of every partition of `topic`. */
async function partitionsOf(admin: Admin, topic: string): Promise<{ partition: number; leader: number; replicas: number[]; isr: number[] }[]> {
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  return (md.topics[0]?.partitions ?? [])
    .map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr }))
    .sort((a, b) => a.partition - b.partition);
}

/** Milliseconds as seconds with one decimal ("n/a" for a figure that did not occur, passed as -1). */
const s = (ms: number): string => (ms < 0 ? "n/a" : (ms / 1000).toFixed(1));

describe("chaos on a replicated Kafka (3 brokers, RF 3, min ISR 2): a broker failure under load", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c();
  });

  test("SIGKILL the broker leading the most jobs partitions under steady load, restart it later: 0 lost, 0 duplicates, 0 wrong", async () => {
    const kafkaCluster: ScratchCluster = await startScratchCluster(3);
    cleanup.push(() => kafkaCluster.stop());
    // Short worker sessions (as in chaos.test.ts): after the group coordinator moves, the members
    // kafkajs re-created on its crash/restart wait for the old ones to expire.
    // Debug lines name each job (written, taken, result sent, call ended without it): a lost call
    // can be followed through the logs, which a failed run leaves in a directory it names.
    const traced = { LOG_LEVEL: "debug" };
    const cluster = await startCluster({
      brokers: kafkaCluster.brokers,
      workers: 2,
      partitions: 6,
      gatewayEnv: traced,
      workerEnv: { ...traced, SHOAL_SESSION_TIMEOUT_MS: "3000", SHOAL_HEARTBEAT_INTERVAL_MS: "500" },
    });
    cleanup.push(() => cluster.stop());
    const model = cluster.modelIds[0]!;
    const topic = jobsTopic(cluster.pool, Lane.INTERACTIVE);

    const kafka = new Kafka({
      clientId: "chaos-replicated-test",
      brokers: kafkaCluster.brokers.split(","),
      logLevel: logLevel.NOTHING,
      connectionTimeout: 1_000,
    });
    const admin = kafka.admin();
    await admin.connect();
    cleanup.push(() => admin.disconnect());

    // The topics Shoal created with replicationFactor -1 took the cluster's default: 3 replicas, all in sync.
    const before = await partitionsOf(admin, topic);
    assert.equal(before.length, 6);
    for (const p of before) {
      assert.equal(p.replicas.length, 3, `partition ${p.partition} has 3 replicas (${JSON.stringify(p.replicas)})`);
      assert.equal(p.isr.length, 3, `partition ${p.partition} has 3 in-sync replicas (${JSON.stringify(p.isr)})`);
    }
    const replyTopic = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]);
    for (const t of [replyTopic, "__consumer_offsets"]) {
      for (const p of await partitionsOf(admin, t)) assert.equal(p.replicas.length, 3, `${t}-${p.partition} has 3 replicas`);
    }
    const configs = await admin.describeConfigs({
      resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["min.insync.replicas"] }],
      includeSynonyms: false,
    });
    const minIsr = configs.resources[0]?.configEntries.find((e) => e.configName === "min.insync.replicas")?.configValue;
    assert.equal(minIsr, "2", "acks=all needs 2 of the 3 replicas");

    // The victim: the broker leading the most jobs partitions (ties: the group coordinator's broker, the harder case).
    const coordinator = (await partitionsOf(admin, "__consumer_offsets"))[0]?.leader ?? -1;
    const leads = new Map<number, number>();
    for (const p of before) leads.set(p.leader, (leads.get(p.leader) ?? 0) + 1);
    const [victimId, victimLeads] = [...leads].sort((a, b) => b[1] - a[1] || Number(b[0] === coordinator) - Number(a[0] === coordinator))[0]!;
    const victim = kafkaCluster.nodes.findIndex((n) => n.id === victimId);
    assert.ok(victim >= 0);

    // The typed client retries Unavailable/ResourceExhausted; each retry is recorded with the call it belongs to.
    const retries: { at: number; call: number; code: string; message: string }[] = [];
    const clientFor = (current: () => number): ReturnType<typeof createShoalClient> =>
      createShoalClient({
        baseUrl: cluster.urls[0]!,
        // Enough attempts to ride out a failover (seconds), within each call's 60 s budget.
        retry: { maxAttempts: 30, initialBackoffMs: 100, maxBackoffMs: 1_000 },
        onRetry: (info: RetryInfo) =>
          retries.push({ at: performance.now(), call: current(), code: Code[info.error.code] ?? "?", message: info.error.rawMessage }),
      });
    // Unique texts, each with its reference vector computed before any failure.
    const client = clientFor(() => -1);
    const texts = Array.from({ length: 1_200 }, (_, i) => `replicated chaos request ${i}: ${"tide ".repeat(i % 7)}${"shoal ".repeat(i % 5)}`);
    const reference: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += 100) reference.push(...(await client.embed(model, texts.slice(i, i + 100))).vectors);

    const gatewayMetrics0 = await scrape(`${cluster.urls[0]}/metrics`);
    const replies = () => replySnapshot(kafkaCluster.brokers, replyTopic, gatewayResultCounters(`${cluster.urls[0]}/metrics`));
    const replies0 = await replies();
    const workerUrls = await Promise.all(
      cluster.workers.map(async (w) => `http://127.0.0.1:${String((await w.waitForLog((l) => l.msg === "worker pulling jobs"))["httpPort"])}`),
    );
    const workerJobs = async (): Promise<number> =>
      (await Promise.all(workerUrls.map((u) => scrape(`${u}/metrics`)))).reduce((n, m) => n + total(m, "shoal_worker_jobs_total"), 0);
    const workerJobs0 = await workerJobs();

    // Steady load: 8 loops, each sending its next request ~100 ms after the last answer, until told to stop.
    interface Outcome {
      sentAt: number;
      doneAt: number;
      answers: number;
      ok: boolean;
      wrong: boolean;
      error?: string;
    }
    const outcomes: Outcome[] = [];
    let stopLoad = false;
    let next = 0;
    const loadStart = performance.now();
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        let i = -1;
        const loopClient = clientFor(() => i);
        while (!stopLoad && next < texts.length) {
          i = next++;
          const o: Outcome = { sentAt: performance.now(), doneAt: 0, answers: 0, ok: false, wrong: false };
          outcomes[i] = o;
          try {
            const res = await loopClient.embed(model, [texts[i]!], { timeoutMs: 60_000 });
            o.answers += 1;
            o.ok = true;
            o.wrong = res.vectors.length !== 1 || maxAbsDiff([...res.vectors[0]!], [...reference[i]!]) > 1e-4;
          } catch (err) {
            o.error = err instanceof Error ? err.message : String(err);
          }
          o.doneAt = performance.now();
          await sleep(100);
        }
      }),
    );

    // t = 4 s: SIGKILL the victim while the load runs.
    await sleep(4_000);
    const sentBeforeKill = next;
    const killedAt = performance.now();
    await kafkaCluster.kill(victim);
    // Leadership moves to the survivors (the controller fences the dead broker after its 3 s session).
    // Brokers apply the controller's records on their own schedule: ask until three answers in a row agree.
    let afterKill: Awaited<ReturnType<typeof partitionsOf>> = [];
    let agreeing = 0;
    let leadersMovedAt = 0;
    const movedOff = await eventually(async () => {
      afterKill = await partitionsOf(admin, topic);
      if (!afterKill.every((p) => p.leader !== victimId && p.leader >= 0)) {
        agreeing = 0;
        return false;
      }
      if (agreeing++ === 0) leadersMovedAt = performance.now();
      return agreeing >= 3;
    }, 20_000);
    // Serving again: a round of answers (one per loop) completed since the leaders moved.
    const servingAgain = await eventually(async () => outcomes.filter((o) => o.ok && o.doneAt >= leadersMovedAt).length >= 8, 30_000, 100);
    const servingAgainAt = performance.now();
    // Then bring the victim back under the same load (log recovery after a crash, catch-up as a follower).
    await sleep(1_000);
    const restartAt = performance.now();
    await kafkaCluster.restart(victim);
    const restartS = s(performance.now() - restartAt);
    const backInSync = await eventually(async () => (await partitionsOf(admin, topic)).every((p) => p.isr.length === 3), 20_000);
    const inSyncS = s(performance.now() - restartAt);
    // Keep the load on until enough requests ran after the kill (a quick failover leaves few).
    await sleep(1_000);
    await eventually(async () => next - sentBeforeKill >= 120, 30_000, 100);
    stopLoad = true;
    await load;
    const loadS = s(performance.now() - loadStart);

    // Tally. Duplicates appear on the reply topic (a job computed again after the failover); the
    // gateway must deliver one result per call and drop the rest.
    const sent = outcomes.length;
    const answered = outcomes.filter((o) => o.ok).length;
    const onTopic = await repliesSince(replies0, outcomes.filter((o) => o.ok).length, replies);
    const wrong = outcomes.filter((o) => o.wrong).length;
    const failed = outcomes.filter((o) => !o.ok);
    const retriedCalls = new Set<number>();
    const byCode = new Map<string, number>();
    for (const r of retries) {
      const key = `${r.code}: ${r.message.replace(/\d+/g, "N").slice(0, 70)}`;
      byCode.set(key, (byCode.get(key) ?? 0) + 1);
    }
    for (const r of retries) if (r.call >= 0) retriedCalls.add(r.call);
    const afterKillRetries = retries.filter((r) => r.at >= killedAt);
    const firstErrorMs = afterKillRetries.length > 0 ? afterKillRetries[0]!.at - killedAt : -1;
    const lastErrorMs = afterKillRetries.length > 0 ? afterKillRetries.at(-1)!.at - killedAt : -1;
    // Recovery: from the kill to the first success of a call that had failed at least once after it.
    const recovered = outcomes.filter((o, i) => o.ok && retriedCalls.has(i) && o.doneAt >= killedAt).map((o) => o.doneAt - killedAt);
    const recoveryMs = recovered.length > 0 ? Math.min(...recovered) : -1;
    const worstMs = Math.max(...outcomes.map((o) => o.doneAt - o.sentAt));
    const beforeKill = outcomes
      .filter((o) => o.ok && o.doneAt < killedAt)
      .map((o) => o.doneAt - o.sentAt)
      .sort((a, b) => a - b);
    const p50BeforeMs = beforeKill[Math.floor(beforeKill.length / 2)] ?? -1;
    // Longest time without any answer once the victim died (served throughout, or stalled?).
    const answersAfterKill = outcomes
      .filter((o) => o.ok && o.doneAt >= killedAt)
      .map((o) => o.doneAt)
      .sort((a, b) => a - b);
    let longestGapMs = answersAfterKill.length > 0 ? answersAfterKill[0]! - killedAt : -1;
    for (let k = 1; k < answersAfterKill.length; k++) longestGapMs = Math.max(longestGapMs, answersAfterKill[k]! - answersAfterKill[k - 1]!);
    const gatewayMetrics1 = await scrape(`${cluster.urls[0]}/metrics`);
    const droppedResults = total(gatewayMetrics1, "shoal_gateway_results_dropped_total") - total(gatewayMetrics0, "shoal_gateway_results_dropped_total");
    const jobsRun = (await workerJobs()) - workerJobs0;

    console.log(
      `replicated broker failure: killed node ${victimId} (led ${victimLeads}/6 jobs partitions${victimId === coordinator ? ", and the group coordinator" : ""}) after ${sentBeforeKill} requests; ` +
        `leaders moved off it in ${s(leadersMovedAt - killedAt)} s (${JSON.stringify(afterKill.map((p) => p.leader))}), answers flowing again ${s(servingAgainAt - killedAt)} s after the kill; ` +
        `restarted in ${restartS} s, all replicas back in sync ${inSyncS} s after the restart began`,
    );
    console.log(
      `replicated broker failure: sent ${sent}, answered ${answered}, lost ${sent - answered}, wrong ${wrong} over ${loadS} s; ` +
        `client retries ${retries.length} on ${retriedCalls.size} calls (${JSON.stringify(Object.fromEntries(byCode))}); ` +
        `first error +${s(firstErrorMs)} s, last error +${s(lastErrorMs)} s, first retried call answered +${s(recoveryMs)} s after the kill; ` +
        `longest gap between answers ${s(longestGapMs)} s; worst latency ${s(worstMs)} s (p50 before the kill ${p50BeforeMs.toFixed(0)} ms); ` +
        `jobs run by workers ${jobsRun} for ${answered} answers (the extra: redelivered or abandoned attempts), results dropped by the gateway (duplicate or late) ${droppedResults}; ` +
        `results: ${onTopic.results} (${onTopic.direct} handed directly; on the reply topic ${onTopic.results - onTopic.direct} for ${onTopic.jobs} jobs, ${onTopic.computedTwice} computed twice), ${onTopic.dropped} dropped, ${onTopic.unaccounted} unaccounted (delivered twice)`,
    );

    // A lost or doubled answer is read from the services' side: print what they warned of, and keep every line.
    if (answered !== sent || onTopic.unaccounted > 0) {
      for (const p of [...cluster.gateways, ...cluster.workers]) process.stderr.write(`${p.warnings(60)}\n`);
      const logDir = join(tmpdir(), `shoal-chaos-replicated-${cluster.pool}`);
      await saveLogs(logDir, [...cluster.gateways, ...cluster.workers]);
      const wall = (t: number): string => new Date(performance.timeOrigin + t).toISOString();
      const calls = failed.map((o) => ({ text: texts[outcomes.indexOf(o)], sent: wall(o.sentAt), ended: wall(o.doneAt), error: o.error }));
      await writeFile(join(logDir, "failed-calls.json"), JSON.stringify({ killedAt: wall(killedAt), calls }, null, 1));
      process.stderr.write(`chaos-replicated: service logs and the failed calls in ${logDir}\n`);
    }

    assert.ok(movedOff, "every jobs partition got a live leader after the kill");
    assert.ok(backInSync, "the restarted broker caught up: 3 in-sync replicas on every jobs partition");
    assert.equal(failed.length, 0, `every request answered (failed: ${JSON.stringify(failed.slice(0, 5).map((o) => o.error))})`);
    assert.equal(answered, sent, "0 lost");
    assert.ok(onTopic.results >= answered, "every answer came from a result, handed directly or on the reply topic");
    assert.equal(onTopic.unaccounted, 0, "each result beyond a call's one answer was dropped by the gateway: 0 duplicates delivered");
    assert.equal(wrong, 0, "every answer is the vector of its own text");
    assert.ok(servingAgain, "answers flow again after the failover");
    assert.ok(sent - sentBeforeKill >= 100, `the load kept going after the kill (${sent - sentBeforeKill} requests)`);
    assert.ok(worstMs < 60_000, `worst latency ${s(worstMs)} s`);
    for (const r of retries) assert.ok(r.code === "Unavailable" || r.code === "ResourceExhausted", `retried only on retriable codes (${r.code}: ${r.message})`);
  });
});
