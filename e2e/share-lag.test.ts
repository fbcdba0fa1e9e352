/**
 * A share pool's backlog as the gateway reports it (GetCluster lanes, and the
 * shoal_gateway_queue_lag_records gauge KEDA scales on): jobs sent while the only worker is hung
 * (SIGSTOP) show as lag; once it resumes and answers them, the lag returns to 0. Twice: first on a
 * share group that never acknowledged anything (the broker has no lag yet: high watermark − low
 * watermark), then on one that has (the broker's KIP-1226 lag).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/** Polls `read` until it returns `want` (bounded); fails with the last value read. */
async function until<T>(what: string, read: () => Promise<T>, want: T, timeoutMs = 20_000): Promise<number> {
  const started = Date.now();
  let last: T | string = "nothing read";
  while (Date.now() - started < timeoutMs) {
    try {
      last = await read();
      if (last === want) return Date.now() - started;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what}: wanted ${String(want)}, last ${String(last)} after ${timeoutMs} ms`);
}

describe("share pool backlog at the gateway", () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;
  before(async () => {
    cluster = await startCluster({ intake: "share", workers: 1 });
    clients = clientsFor(cluster.urls[0]!, "grpc");
  });
  after(() => cluster?.stop());

  /** The pool's records waiting, all lanes, as GetCluster says. */
  const clusterLag = async (): Promise<number> => {
    const res = await clients.cluster.getCluster({});
    const mine = res.lanes.filter((l) => l.pool === cluster.pool);
    if (mine.length === 0) throw new Error("no lanes for the pool yet");
    return mine.reduce((n, l) => n + Number(l.records), 0);
  };
  /** The same, from the gauge on /metrics. */
  const gaugeLag = async (): Promise<number> => {
    const s = await scrape(`${cluster.urls[0]}/metrics`);
    if (!s.text.includes(`shoal_gateway_queue_lag_records{pool="${cluster.pool}"`)) throw new Error("no gauge for the pool yet");
    return total(s, "shoal_gateway_queue_lag_records", { pool: cluster.pool });
  };

  async function hangSendResume(jobs: number): Promise<void> {
    const worker = cluster.workers[0]!;
    worker.signal("SIGSTOP");
    let answers: Promise<unknown[]>;
    try {
      answers = Promise.all(
        Array.from({ length: jobs }, (_, i) =>
          clients.inference.embed({ model: cluster.modelIds[0]!, inputs: [`queued ${jobs} ${i}`] }, { timeoutMs: 120_000 }),
        ),
      );
      answers.catch(() => {}); // awaited below
      const ms = await until("GetCluster shows the queued jobs", clusterLag, jobs);
      await until("the gauge shows the queued jobs", gaugeLag, jobs);
      console.log(`${jobs} jobs queued behind a hung worker: visible in GetCluster after ${ms} ms`);
    } finally {
      worker.signal("SIGCONT");
    }
    const answered = await answers;
    assert.equal(answered.length, jobs);
    const ms = await until("GetCluster lag back to 0", clusterLag, 0, 30_000);
    await until("the gauge back to 0", gaugeLag, 0);
    console.log(`answered; backlog 0 in GetCluster ${ms} ms after the last answer`);
  }

  test("before the group's first acknowledgement (no broker lag yet)", async () => {
    await until("GetCluster reads the pool's lanes", clusterLag, 0);
    await hangSendResume(4);
  });

  test("after it (the broker's lag, KIP-1226)", async () => {
    await hangSendResume(6);
  });
});
