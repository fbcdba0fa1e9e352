import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { startScratchBroker, type ScratchBroker } from "../infra/dev/broker.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, maxAbsDiff } from "./harness/clients.ts";
import { gatewayResultCounters, type ReplySnapshot, repliesSince, replySnapshot } from "./harness/reply-topic.ts";

interface Tally {
  sent: number;
  answered: number;
  failed: Map<string, number>;
  wrong: number;
  latencies: number[];
}

/** Bounded closed-loop load: `total` requests from `concurrency` loops, each checked against its reference vector. */
async function load(
  cluster: TestCluster,
  opts: { total: number; concurrency: number; gateway?: number; onSent?: (n: number) => void; timeoutMs?: number; beforeLoad?: () => Promise<void> },
): Promise<Tally> {
  const model = cluster.modelIds[0]!;
  const { inference } = clientsFor(cluster.urls[opts.gateway ?? 0]!, "grpc");
  const texts = Array.from({ length: 20 }, (_, i) => `chaos request ${i} ${"words ".repeat(i)}`);
  const expected = new Map<number, number[]>();
  for (const [i, t] of texts.entries()) expected.set(i, (await inference.embed({ model, inputs: [t] })).embeddings[0]!.values);
  await opts.beforeLoad?.();
  const tally: Tally = { sent: 0, answered: 0, failed: new Map(), wrong: 0, latencies: [] };
  let next = 0;
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      while (next < opts.total) {
        const i = next++;
        tally.sent += 1;
        opts.onSent?.(tally.sent);
        const t = performance.now();
        try {
          const res = await inference.embed({ model, inputs: [texts[i % texts.length]!] }, { timeoutMs: opts.timeoutMs ?? 60_000 });
          tally.answered += 1;
          tally.latencies.push(performance.now() - t);
          if (maxAbsDiff(res.embeddings[0]!.values, expected.get(i % texts.length)!) > 1e-5) tally.wrong += 1;
        } catch (err) {
          const e = ConnectError.from(err);
          // A request racing the connection's close is reset by the transport (http2 GOAWAY/RST):
          // retriable like Unavailable, and never a request the gateway had accepted.
          const transportReset = e.code !== Code.Unavailable && /stream|socket|GOAWAY|closed|ECONNRE/i.test(e.rawMessage);
          const code = transportReset ? "Unavailable(transport)" : (Code[e.code] ?? "?");
          tally.failed.set(code, (tally.failed.get(code) ?? 0) + 1);
        }
      }
    }),
  );
  return tally;
}

describe("chaos on the real stack (bounded): crashes, drains and a broker outage", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c();
  });

  test("kill -9 a worker under steady load: 0 lost, 0 wrong, recovery in seconds", async () => {
    const cluster = await startCluster({ workers: 2, workerEnv: { SHOAL_SESSION_TIMEOUT_MS: "3000", SHOAL_HEARTBEAT_INTERVAL_MS: "500" } });
    cleanup.push(() => cluster.stop());
    const replyTopic = String((await cluster.gateways[0]!.waitForLog((l) => l.msg === "gateway serving"))["replyTopic"]);
    const gatewayMetrics = `${cluster.urls[0]}/metrics`;
    let killedAt = 0;
    const snapshot = () => replySnapshot(kafkaBrokers(), replyTopic, gatewayResultCounters(gatewayMetrics));
    let before: ReplySnapshot | undefined;
    const tally = await load(cluster, {
      total: 400,
      concurrency: 16,
      beforeLoad: async () => {
        before = await snapshot();
      },
      onSent: (n) => {
        if (n === 120) {
          killedAt = performance.now();
          void cluster.workers[0]!.stop("SIGKILL");
        }
      },
    });
    const recoveryS = Math.max(...tally.latencies) / 1000;
    // Where duplicates can appear: a job the killed worker had computed but not acknowledged runs
    // again elsewhere, so its result reaches the gateway twice (directly or on the reply topic).
    // The gateway answers each call once: every result is either the one answer to a call or
    // counted as dropped.
    const replies = await repliesSince(before!, tally.answered, snapshot);
    console.log(
      `kill -9: sent ${tally.sent}, answered ${tally.answered}, lost ${tally.sent - tally.answered}, wrong ${tally.wrong}, worst latency (recovery) ${recoveryS.toFixed(1)} s; ` +
        `results: ${replies.results} (${replies.direct} handed directly; on the reply topic ${replies.results - replies.direct} for ${replies.jobs} jobs, ${replies.computedTwice} computed twice), ${replies.dropped} dropped by the gateway, ${replies.unaccounted} unaccounted (delivered twice)`,
    );
    assert.ok(replies.results >= tally.answered, "every answer came from a result, handed directly or on the reply topic");
    assert.equal(replies.unaccounted, 0, "every result beyond a call's one answer was dropped, none delivered twice");
    assert.ok(killedAt > 0);
    assert.equal(tally.answered, 400, `every request answered (failed: ${JSON.stringify([...tally.failed])})`);
    assert.equal(tally.wrong, 0);
    assert.ok(recoveryS < 20, `recovered in seconds (${recoveryS.toFixed(1)} s)`);
  });

  test("SIGTERM a worker and a gateway under load: every in-flight request answered, clean exits", async () => {
    const cluster = await startCluster({ workers: 2, gateways: 2 });
    cleanup.push(() => cluster.stop());
    let workerExit: Promise<number | null> | undefined;
    const viaSurvivor = load(cluster, {
      total: 300,
      concurrency: 8,
      gateway: 1,
      onSent: (n) => {
        if (n === 100) workerExit = cluster.workers[1]!.stop("SIGTERM");
      },
    });
    let gatewayExit: Promise<number | null> | undefined;
    const viaDraining = load(cluster, {
      total: 60,
      concurrency: 8,
      gateway: 0,
      onSent: (n) => {
        if (n === 40) gatewayExit = cluster.gateways[0]!.stop("SIGTERM");
      },
    });
    const [survivor, draining] = await Promise.all([viaSurvivor, viaDraining]);
    console.log(
      `SIGTERM: worker drained -> ${survivor.answered}/${survivor.sent} answered; gateway drained -> ${draining.answered} answered, refused ${JSON.stringify([...draining.failed])}`,
    );
    assert.equal(await workerExit, 0, "worker exits 0 after draining");
    assert.equal(await gatewayExit, 0, "gateway exits 0 after draining");
    assert.equal(survivor.answered, survivor.sent, "no request lost when a worker drains");
    assert.equal(survivor.wrong + draining.wrong, 0);
    // The draining gateway answers what it accepted; afterwards calls are refused as Unavailable.
    assert.ok(draining.answered >= 40 - 8, `requests sent before SIGTERM were answered (${draining.answered})`);
    for (const code of draining.failed.keys()) assert.ok(code.startsWith("Unavailable"), `refused with ${code}`);
  });

  test("stop and restart the broker under load: prompt Unavailable during the outage, automatic recovery, no accepted job lost", async () => {
    const broker: ScratchBroker = await startScratchBroker();
    cleanup.push(() => broker.stop());
    const cluster = await startCluster({ brokers: broker.brokers, workers: 1 });
    cleanup.push(() => cluster.stop());
    const model = cluster.modelIds[0]!;
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    // Sent just before the outage. The broker pauses once the first of them is answered (at most
    // 10 s), not after a fixed 50 ms: on a loaded host none had been acknowledged 50 ms in, all 20
    // were answered Unavailable (a fresh-clone CI of c9f12e5), and the test then showed nothing of
    // accepted work. The rest are in flight at the gateway, in Kafka or on the worker when it pauses.
    let firstAnswered: () => void = () => undefined;
    const answered = new Promise<void>((resolve) => {
      firstAnswered = resolve;
    });
    const accepted = Array.from({ length: 20 }, (_, i) =>
      inference.embed({ model, inputs: [`accepted before the outage ${i}`] }, { timeoutMs: 90_000 }).then(
        () => {
          firstAnswered();
          return "ok";
        },
        (err: unknown) => Code[ConnectError.from(err).code],
      ),
    );
    await Promise.race([answered, new Promise((r) => setTimeout(r, 10_000))]);
    await broker.pause();
    const during: { code: string; ms: number }[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      const code = await inference.embed({ model, inputs: ["during the outage"] }, { timeoutMs: 30_000 }).then(
        () => "ok",
        (err: unknown) => Code[ConnectError.from(err).code] ?? "?",
      );
      during.push({ code, ms: performance.now() - t });
    }
    const restartedAt = performance.now();
    await broker.resume();
    let recoveredMs = -1;
    for (let i = 0; i < 120 && recoveredMs < 0; i++) {
      const ok = await inference.embed({ model, inputs: ["after the outage"] }, { timeoutMs: 5_000 }).then(
        () => true,
        () => false,
      );
      if (ok) recoveredMs = performance.now() - restartedAt;
      else await new Promise((r) => setTimeout(r, 500));
    }
    const acceptedOutcomes = await Promise.all(accepted);
    const acceptedByCode: Record<string, number> = {};
    for (const c of acceptedOutcomes) acceptedByCode[c ?? "?"] = (acceptedByCode[c ?? "?"] ?? 0) + 1;
    console.log(
      `broker outage: during ${JSON.stringify(during.map((d) => `${d.code} in ${d.ms.toFixed(0)} ms`))}; recovered ${(recoveredMs / 1000).toFixed(1)} s after restart; accepted before: ${JSON.stringify(acceptedByCode)}`,
    );
    for (const d of during) {
      assert.equal(d.code, "Unavailable", "new requests fail fast with Unavailable while Kafka is down");
      assert.ok(d.ms < 5_000, `promptly (${d.ms.toFixed(0)} ms)`);
    }
    assert.ok(recoveredMs >= 0, "the cluster serves again by itself");
    // Accepted work completes, or fails with a retriable code; never silently lost (no hang past its deadline).
    for (const c of acceptedOutcomes) assert.ok(c === "ok" || c === "Unavailable", `accepted job outcome ${c}`);
    assert.ok(acceptedOutcomes.filter((c) => c === "ok").length >= 1);
  });
});
