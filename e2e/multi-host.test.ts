/**
 * Shoal across hosts, on one machine: network namespaces on a bridge stand in for machines. Three
 * Kafka hosts (RF 3, min ISR 2), two gateway hosts, three worker hosts; the test process in the
 * root namespace is the client host and reaches the gateways over the bridge. Under a steady
 * open-loop load of small Embed calls: (a) a worker host is cut off from the brokers for 30 s,
 * then healed; (b) a broker host is cut off from everyone, then healed; (c) a fourth worker host
 * joins; (d) a worker is stopped cleanly (SIGTERM, drain). Every call must be answered once, with
 * its own text's vector; figures per event are printed as a table.
 *
 * Retries: only the client library's own (@shoal/client retries Unavailable and ResourceExhausted
 * with backoff of at most 1 s, within each call's 60 s budget); the test never re-sends.
 */
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { createShoalClient, type ShoalClient } from "@shoal/client";
import { jobsTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { maxAbsDiff } from "./harness/clients.ts";
import { testIntake, writeCatalog } from "./harness/cluster.ts";
import { figuresOf, figuresTable, type LoadEvent, type Outcome } from "./harness/load-figures.ts";
import { createNetLab, netnsProblem, type Host, type NetLab } from "./harness/netns.ts";
import { KAFKA_CLIENT_PORT, startNetnsKafka } from "./harness/netns-kafka.ts";
import { startGatewayOn, startWorkerOn, type HostedService, type ServiceSettings } from "./harness/netns-services.ts";
import { scrape, total } from "./harness/prometheus.ts";
import { gatewayResultCounters, repliesSince, replySnapshot, type ReplySnapshot } from "./harness/reply-topic.ts";
import { saveLogs } from "./harness/service-process.ts";
import { eventually } from "./harness/wait.ts";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Leader and in-sync replicas of every partition of `topic`, as the broker on `host` sees them:
 * one short-lived admin per question, with short timeouts, so a cut broker elsewhere cannot hold
 * the answer up (a kafkajs client waits out its request timeout on a silent peer).
 */
async function partitionsOn(host: Host, topic: string): Promise<{ leader: number; isr: number[] }[]> {
  const admin = new Kafka({
    clientId: "multi-host-test",
    brokers: [`${host.ip}:${KAFKA_CLIENT_PORT}`],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_000,
    requestTimeout: 2_000,
    retry: { retries: 0 },
  }).admin();
  try {
    await admin.connect();
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    return (md.topics[0]?.partitions ?? []).map((p) => ({ leader: p.leader, isr: p.isr }));
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

const RATE_PER_S = 10;
const MAX_REQUESTS = 4_000;
const CALL_TIMEOUT_MS = 60_000;
const PARTITION_MS = 30_000;
const BROKER_PARTITION_MS = 20_000;
const SETTLE_MS = 10_000;

const problem = await netnsProblem();

describe("multi-host: Kafka, gateways and workers on separate network-namespace hosts", { skip: problem === undefined ? false : `skipped: ${problem}` }, () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) {
      await c().catch((err: unknown) => process.stderr.write(`cleanup: ${err instanceof Error ? err.message : String(err)}\n`));
    }
  });

  test("worker-host partition, broker partition, scale up, scale down under steady load: 0 lost, 0 duplicates", { timeout: 330_000 }, async () => {
    const t0 = performance.now();
    const lab: NetLab = await createNetLab();
    cleanup.push(() => lab.destroy());
    const brokerHosts: Host[] = [];
    for (const label of ["kafka1", "kafka2", "kafka3"]) brokerHosts.push(await lab.addHost(label));
    const gatewayHosts = [await lab.addHost("gw1"), await lab.addHost("gw2")];
    const workerHosts = [await lab.addHost("w1"), await lab.addHost("w2"), await lab.addHost("w3")];

    const kafka = await startNetnsKafka(brokerHosts);
    // Set when a call is lost: the brokers' data and logs then stay beside the service logs.
    let keepKafkaIn: string | undefined;
    cleanup.push(() => kafka.stop(keepKafkaIn));
    const intake = testIntake();
    const { path: catalogPath, pool } = await writeCatalog(["tiny"], 6, intake);
    const settings: ServiceSettings = { brokers: kafka.brokers, catalogPath, pool };
    const services: HostedService[] = [];
    cleanup.push(() => Promise.all(services.map((s) => s.proc.stop("SIGKILL"))));
    // Debug lines name each job (taken, result sent, not acknowledged, dropped): a lost call can be followed through the logs.
    const traced = { LOG_LEVEL: "debug" };
    const workers = await Promise.all(workerHosts.map((h) => startWorkerOn(h, settings, traced)));
    services.push(...workers);
    const gateways = await Promise.all(gatewayHosts.map((h) => startGatewayOn(h, settings, traced)));
    services.push(...gateways);
    const model = ((await gateways[0]!.proc.waitForLog((l) => l.msg === "gateway serving"))["models"] as string[])[0]!;
    const setupS = (performance.now() - t0) / 1000;

    // Service logs (JSON lines) land here for a look after the run.
    const logDir = join(tmpdir(), `shoal-multi-host-${pool}`);
    const runRecord: { outcomes?: unknown; events?: unknown } = {};
    cleanup.push(async () => {
      await saveLogs(
        logDir,
        services.map((s) => ({ name: s.host.label, logs: s.proc.logs })),
      );
      await writeFile(join(logDir, "run.json"), JSON.stringify(runRecord));
      process.stderr.write(`multi-host: service logs in ${logDir}\n`);
    });
    const topic = jobsTopic(pool, Lane.INTERACTIVE);

    const retryTimes: number[] = [];
    const retryReasons = new Map<string, number>();
    const clients: ShoalClient[] = gateways.map((g) =>
      createShoalClient({
        baseUrl: g.url,
        httpVersion: "2",
        // Attempts enough for the call's 60 s budget (not the count) to bound the retrying.
        retry: { maxAttempts: 200, initialBackoffMs: 100, maxBackoffMs: 1_000 },
        onRetry: (info) => {
          retryTimes.push(performance.now());
          const reason = `${Code[info.error.code]}: ${info.error.rawMessage.replace(/\d+/g, "N")}`;
          retryReasons.set(reason, (retryReasons.get(reason) ?? 0) + 1);
        },
      }),
    );
    // A warm-up call through each gateway (model load, first produce), outside the figures.
    for (const c of clients) assert.equal((await c.embed(model, ["warm-up"], { timeoutMs: CALL_TIMEOUT_MS })).vectors.length, 1);

    const droppedOf = (g: HostedService) => gatewayResultCounters(`${g.url}/metrics`);
    const replies0: ReplySnapshot[] = await Promise.all(gateways.map((g) => replySnapshot(kafka.brokers, g.replyTopic, droppedOf(g))));
    const workerJobs = async (w: HostedService): Promise<number> => total(await scrape(`${w.url}/metrics`), "shoal_worker_jobs_total");

    // Open-loop load: request i leaves at loadStart + i / RATE, whatever happened to the earlier ones.
    const textOf = (i: number): string => `multi-host request ${i}: ${"reef ".repeat(i % 5)}${"current ".repeat(i % 3)}`;
    const outcomes: Outcome[] = [];
    const inFlight = new Set<Promise<void>>();
    let stopLoad = false;
    const loadStart = performance.now();
    const send = async (i: number): Promise<void> => {
      const o: Outcome = { index: i, sentAt: performance.now(), doneAt: 0, answers: 0, ok: false };
      outcomes.push(o);
      try {
        const res = await clients[i % clients.length]!.embed(model, [textOf(i)], { timeoutMs: CALL_TIMEOUT_MS });
        o.answers += 1;
        o.ok = res.vectors.length === 1;
        o.vector = res.vectors[0];
      } catch (err) {
        o.error = err instanceof Error ? err.message : String(err);
      }
      o.doneAt = performance.now();
    };
    const load = (async () => {
      for (let i = 0; i < MAX_REQUESTS && !stopLoad; i++) {
        const due = loadStart + (i * 1_000) / RATE_PER_S;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const p = send(i);
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
    })();

    const events: LoadEvent[] = [];
    const notes: string[] = [];
    /**
     * Waits until requests sent after `since` are answered again (a second's worth of them, up to
     * 60 s), then until `since + SETTLE_MS`; returns how long after `since` answers flowed again.
     */
    const recover = async (since: number): Promise<string> => {
      let at = -1;
      await eventually(
        async () => {
          const fresh = outcomes.filter((o) => o.ok && o.sentAt >= since).map((o) => o.doneAt);
          if (fresh.length < RATE_PER_S) return false;
          at = fresh.sort((a, b) => a - b)[RATE_PER_S - 1]!;
          return true;
        },
        60_000,
        100,
      );
      await sleep(Math.max(0, since + SETTLE_MS - performance.now()));
      return at < 0 ? "not within 60 s" : `${((at - since) / 1000).toFixed(1)} s`;
    };
    await sleep(8_000);

    // (a) Worker host w3 cut off from the three broker hosts for 30 s, then healed.
    const victimWorker = workers[2]!;
    const jobsBeforeCut = await workerJobs(victimWorker);
    let start = performance.now();
    await lab.partition(victimWorker.host, brokerHosts);
    await sleep(PARTITION_MS);
    await lab.heal(victimWorker.host);
    let end = performance.now();
    const jobsAtHeal = await workerJobs(victimWorker);
    const backToWork = await eventually(async () => (await workerJobs(victimWorker)) > jobsAtHeal, SETTLE_MS, 250);
    const backAfterS = (performance.now() - end) / 1000;
    let flowing = await recover(end);
    events.push({ name: "worker host cut from brokers 30 s", start, end, settled: performance.now(), note: "" });
    notes.push(
      `worker ${victimWorker.host.label}: ${jobsAtHeal - jobsBeforeCut} jobs finished while cut off; ${backToWork ? `took jobs again ${backAfterS.toFixed(1)} s after the heal` : `no new job within ${SETTLE_MS / 1000} s of the heal`}; new requests answered again ${flowing} after the heal`,
    );

    // (b) The broker host leading the most jobs partitions, cut off from every host for 20 s.
    const leaders = (await partitionsOn(brokerHosts[0]!, topic)).map((p) => p.leader);
    const leadCount = (id: number): number => leaders.filter((l) => l === id).length;
    const victimId = [...kafka.ids].sort((a, b) => leadCount(b) - leadCount(a))[0]!;
    const victimBroker = brokerHosts[kafka.ids.indexOf(victimId)]!;
    const survivor = brokerHosts.find((h) => h !== victimBroker)!;
    start = performance.now();
    await lab.isolate(victimBroker);
    const movedOff = await eventually(
      async () => (await partitionsOn(survivor, topic)).every((p) => p.leader !== victimId && p.leader >= 0),
      BROKER_PARTITION_MS,
      500,
    );
    const movedS = (performance.now() - start) / 1000;
    await sleep(Math.max(0, start + BROKER_PARTITION_MS - performance.now()));
    await lab.heal(victimBroker);
    end = performance.now();
    const inSync = await eventually(async () => (await partitionsOn(survivor, topic)).every((p) => p.isr.length === 3), 30_000, 500);
    const inSyncS = (performance.now() - end) / 1000;
    flowing = await recover(end);
    events.push({ name: "broker host cut off 20 s", start, end, settled: performance.now(), note: "" });
    notes.push(
      `broker ${victimId} (${victimBroker.label}, led ${leadCount(victimId)}/6 jobs partitions): leaders moved off it ${movedOff ? `${movedS.toFixed(1)} s` : "not"} after the cut; all replicas in sync ${inSync ? `${inSyncS.toFixed(1)} s` : "not within 30 s"} after the heal; new requests answered again ${flowing} after the heal`,
    );

    // (c) A fourth worker host joins: from starting the process to its first job.
    start = performance.now();
    const newHost = await lab.addHost("w4");
    const newWorker = await startWorkerOn(newHost, settings, traced);
    services.push(newWorker);
    const joinedS = (performance.now() - start) / 1000;
    const tookJobs = await eventually(async () => (await workerJobs(newWorker)) > 0, 30_000, 250);
    end = performance.now();
    flowing = await recover(end);
    events.push({ name: "worker host added", start, end, settled: performance.now(), note: "" });
    notes.push(
      `new worker ${newHost.label}: pulling jobs ${joinedS.toFixed(1)} s after start, first job ${tookJobs ? `${((end - start) / 1000).toFixed(1)} s` : "not within 30 s"} after start`,
    );

    // (d) Worker w1 stopped cleanly (SIGTERM: it drains what it holds, then leaves the group).
    const leaving = workers[0]!;
    start = performance.now();
    const exitCode = await leaving.proc.stop("SIGTERM", 40_000);
    end = performance.now();
    flowing = await recover(end);
    events.push({ name: "worker stopped (SIGTERM)", start, end, settled: performance.now(), note: "" });
    notes.push(`worker ${leaving.host.label}: exited with ${exitCode} ${((end - start) / 1000).toFixed(1)} s after SIGTERM`);

    // Stop sending, let every call finish (each has a 60 s budget).
    stopLoad = true;
    await load;
    const drained = await eventually(async () => inFlight.size === 0, CALL_TIMEOUT_MS + 5_000, 100);
    const loadS = (performance.now() - loadStart) / 1000;

    // Gateways deliver one result per call: whatever else reached their reply topics (jobs computed
    // twice after a lock expiry or a failover) must have been dropped.
    const onTopic = await Promise.all(
      gateways.map((g, gi) =>
        repliesSince(replies0[gi]!, outcomes.filter((o) => o.ok && o.index % gateways.length === gi).length, () =>
          replySnapshot(kafka.brokers, g.replyTopic, droppedOf(g)),
        ),
      ),
    );

    // Every answer must be its own text's vector: recompute them on the healed cluster, in batches.
    const answered = outcomes.filter((o) => o.ok);
    for (let k = 0; k < answered.length; k += 100) {
      const batch = answered.slice(k, k + 100);
      const ref = await clients[0]!.embed(
        model,
        batch.map((o) => textOf(o.index)),
        { timeoutMs: CALL_TIMEOUT_MS },
      );
      batch.forEach((o, j) => {
        o.wrong = maxAbsDiff([...o.vector!], [...ref.vectors[j]!]) > 1e-4;
      });
    }
    // The texts' vectors tell the requests apart (else a swapped answer could pass the check above).
    const distinct = new Set(answered.map((o) => Array.from(o.vector!.subarray(0, 8), (v) => v.toFixed(4)).join(","))).size;
    const rows = events.map((e) => figuresOf(e, outcomes, retryTimes));
    // Wall-clock times of the events and requests, to line up with the services' logs.
    const wall = (t: number): string => new Date(Date.now() - performance.now() + t).toISOString();
    runRecord.events = events.map((e) => ({ name: e.name, start: wall(e.start), end: wall(e.end), settled: wall(e.settled) }));
    runRecord.outcomes = outcomes.map((o) => ({ i: o.index, sent: wall(o.sentAt), ms: Math.round(o.doneAt - o.sentAt), ok: o.ok, error: o.error }));
    const failed = outcomes.filter((o) => !o.ok);
    const wrong = outcomes.filter((o) => o.wrong === true || o.answers > 1);
    const unaccounted = onTopic.reduce((n, t) => n + t.unaccounted, 0);
    console.log(
      `multi-host: ${intake} intake, ${RATE_PER_S} req/s open loop for ${loadS.toFixed(0)} s, ${outcomes.length} sent, ${answered.length} answered, ${failed.length} lost, ${wrong.length} duplicate or wrong, ${retryTimes.length} client retries; setup ${setupS.toFixed(0)} s (lab on ${lab.subnet})`,
    );
    console.log(
      `multi-host figures (stall = longest time without any answer from the event's start to the end of its recovery window):\n${figuresTable(rows)}`,
    );
    for (const n of notes) console.log(`multi-host: ${n}`);
    console.log(`multi-host: client retries by cause: ${JSON.stringify(Object.fromEntries(retryReasons))}`);
    console.log(
      `multi-host reply topics: ${onTopic.map((t, gi) => `${gatewayHosts[gi]!.label}: ${t.results} results (${t.direct} handed directly; on the topic ${t.results - t.direct} for ${t.jobs} jobs, ${t.computedTwice} computed twice), ${t.dropped} dropped, ${t.unaccounted} delivered twice`).join("; ")}; distinct vectors ${distinct}/${answered.length}`,
    );

    // A lost call is followed up here, in the test's own output (a CI run keeps only that): when
    // it was sent against the events, what it got, and each service's last warnings.
    if (failed.length > 0 || !drained) {
      const at = (t: number): string => {
        const e = events.find((ev) => t >= ev.start && t <= ev.settled);
        return e === undefined ? `load +${((t - loadStart) / 1000).toFixed(1)} s` : `${e.name} +${((t - e.start) / 1000).toFixed(1)} s`;
      };
      const lines = failed
        .slice(0, 30)
        .map(
          (o) =>
            `  #${o.index} via ${gatewayHosts[o.index % gateways.length]!.label}, sent ${at(o.sentAt)}, ${Math.round(o.doneAt - o.sentAt)} ms: ${o.error ?? "no answer"}`,
        );
      process.stderr.write(`multi-host: ${failed.length} calls lost, the first ${lines.length}:\n${lines.join("\n")}\n`);
      keepKafkaIn = logDir;
      for (const s of services) process.stderr.write(`${s.proc.warnings(25)}\n`);
    }
    assert.ok(drained, "every call settled within its budget");
    assert.equal(failed.length, 0, `every request answered (failed: ${JSON.stringify(failed.slice(0, 5).map((o) => o.error))})`);
    assert.equal(wrong.length, 0, "every answer is its own text's vector, given once");
    assert.equal(unaccounted, 0, "no result delivered twice by a gateway");
    assert.equal(distinct, answered.length, "the texts' vectors are distinct, so the value check identifies each request");
    assert.ok(movedOff, "jobs partitions got leaders off the cut broker");
    assert.ok(inSync, "the healed broker caught up: 3 in-sync replicas on every jobs partition");
    assert.ok(tookJobs, "the added worker took jobs");
    assert.equal(exitCode, 0, "the stopped worker drained and exited cleanly");
    for (const r of rows) assert.ok(r.sent > 0 && r.afterRps > 0, `${r.name}: load ran through the event and answers flowed after it`);
  });
});
