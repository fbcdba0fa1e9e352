import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { VectorEncoding } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

const LONG = "scheduling keeps hardware full and short jobs fast ".repeat(40); // > 256 tokens: truncated
const packed = { encoding: VectorEncoding.FLOAT32_LE, truncate: true };

async function outcome(p: Promise<unknown>): Promise<{ code: Code | "ok"; ms: number; retryAfterMs?: string }> {
  const t = performance.now();
  try {
    await p;
    return { code: "ok", ms: performance.now() - t };
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, ms: performance.now() - t, retryAfterMs: e.metadata.get("retry-after-ms") ?? undefined };
  }
}

describe("scheduling on the real stack: lanes, deadlines, admission (MiniLM-shaped model)", () => {
  let cluster: TestCluster;
  let workerUrl: string;
  let model: string;
  before(async () => {
    cluster = await startCluster({
      presets: ["mini"],
      workerEnv: { SHOAL_INTRA_OP_THREADS: "2" },
      gatewayEnv: { SHOAL_MAX_INFLIGHT_TOKENS_BATCH: "40000" },
    });
    model = cluster.modelIds[0]!;
    const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    workerUrl = `http://127.0.0.1:${String(line["httpPort"])}`;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("with the batch lane saturated by long inputs, interactive requests still meet their deadlines", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    // ~30k tokens on the batch lane: several seconds of work for this worker.
    const flood = Array.from({ length: 4 }, () =>
      inference.embed({ model, inputs: Array.from({ length: 32 }, (_, i) => `${i} ${LONG}`), options: packed, lane: Lane.BATCH }, { timeoutMs: 120_000 }),
    );
    await new Promise((r) => setTimeout(r, 300)); // the flood is queued and running
    const interactive: { code: Code | "ok"; ms: number }[] = [];
    for (let i = 0; i < 8; i++) {
      interactive.push(await outcome(inference.embed({ model, inputs: [`quick question ${i}`], lane: Lane.INTERACTIVE }, { timeoutMs: 2_500 })));
      await new Promise((r) => setTimeout(r, 100));
    }
    const floodDone = await Promise.all(flood.map(outcome));
    assert.deepEqual(
      interactive.map((o) => o.code),
      Array(8).fill("ok"),
      `interactive results: ${JSON.stringify(interactive)}`,
    );
    assert.deepEqual(
      floodDone.map((o) => o.code),
      Array(4).fill("ok"),
      "the batch lane completes too",
    );
    const worst = Math.max(...interactive.map((o) => o.ms));
    const floodMs = Math.max(...floodDone.map((o) => o.ms));
    console.log(`interactive worst ${worst.toFixed(0)} ms while the batch flood took ${floodMs.toFixed(0)} ms`);
    assert.ok(worst < floodMs, "interactive did not wait behind the whole flood");
  });

  test("expired jobs are never computed (the worker's compute counter proves it)", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "grpc");
    const before = await scrape(`${workerUrl}/metrics`);
    // A blocker of 64 long texts keeps the worker busy for seconds...
    const blocker = inference.embed({ model, inputs: Array.from({ length: 64 }, (_, i) => `${i} ${LONG}`), options: packed }, { timeoutMs: 120_000 });
    await new Promise((r) => setTimeout(r, 200));
    // ...so these 20 short jobs expire in the queue behind it.
    const doomed = await Promise.all(Array.from({ length: 20 }, (_, i) => outcome(inference.embed({ model, inputs: [`doomed ${i}`] }, { timeoutMs: 300 }))));
    assert.deepEqual(
      doomed.map((o) => o.code),
      Array(20).fill(Code.DeadlineExceeded),
    );
    assert.equal((await outcome(blocker)).code, "ok");
    // Wait until the worker answered all 21 jobs and counted the blocker's texts, then compare what
    // it computed. A job is answered as soon as its last text is done, and its batch is counted
    // when the whole batch has run, so the count may trail the answer: it is read again until it
    // has the blocker's 64, then once more a moment later, when a doomed job's text would show.
    const deadline = Date.now() + 30_000;
    let after = await scrape(`${workerUrl}/metrics`);
    const answered = (s: typeof after): number => total(s, "shoal_worker_jobs_total", { model });
    const computedIn = (s: typeof after): number =>
      total(s, "shoal_worker_items_computed_total", { model }) - total(before, "shoal_worker_items_computed_total", { model });
    while ((answered(after) - answered(before) < 21 || computedIn(after) < 64) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      after = await scrape(`${workerUrl}/metrics`);
    }
    assert.equal(answered(after) - answered(before), 21);
    await new Promise((r) => setTimeout(r, 500));
    after = await scrape(`${workerUrl}/metrics`);
    // A doomed job the worker reached before its deadline (between two of the blocker's batches, on
    // a fast run) is computed and answered OK, too late for its caller; every other one is skipped.
    const okJobs = total(after, "shoal_worker_jobs_total", { model, status: "OK" }) - total(before, "shoal_worker_jobs_total", { model, status: "OK" });
    const reachedInTime = okJobs - 1;
    assert.equal(
      computedIn(after),
      64 + reachedInTime,
      `the blocker's 64 texts ran, and the ${reachedInTime} doomed jobs reached before their deadline; no expired one`,
    );
    assert.ok(reachedInTime <= 10, `most doomed jobs expired in the queue (${reachedInTime} of 20 reached in time)`);
    const skipped =
      total(after, "shoal_worker_jobs_total", { model, status: "DEADLINE_EXCEEDED" }) -
      total(before, "shoal_worker_jobs_total", { model, status: "DEADLINE_EXCEEDED" }) +
      total(after, "shoal_worker_jobs_total", { model, status: "CANCELLED" }) -
      total(before, "shoal_worker_jobs_total", { model, status: "CANCELLED" });
    assert.equal(skipped, 20 - reachedInTime, "the expired jobs were answered without compute");
  });

  test("overload returns ResourceExhausted promptly with a retry hint, and every accepted request completes", async () => {
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    // The batch lane admits 40,000 estimated tokens in flight at this gateway; offer ~4x that.
    const texts = Array.from({ length: 16 }, (_, i) => `${i} ${LONG}`); // 16 x 256 = ~4,100 tokens each
    const results = await Promise.all(
      Array.from({ length: 40 }, () => outcome(inference.embed({ model, inputs: texts, options: packed, lane: Lane.BATCH }, { timeoutMs: 120_000 }))),
    );
    const ok = results.filter((r) => r.code === "ok");
    const refused = results.filter((r) => r.code === Code.ResourceExhausted);
    assert.equal(ok.length + refused.length, 40, `only OK or ResourceExhausted: ${JSON.stringify(results.map((r) => r.code))}`);
    assert.ok(refused.length >= 20, `most of the overload is refused (${refused.length})`);
    assert.ok(ok.length >= 5, `what fits is served (${ok.length})`);
    for (const r of refused) {
      assert.ok(r.ms < 500, `refused promptly (${r.ms.toFixed(0)} ms)`);
      assert.ok(Number(r.retryAfterMs) >= 50, `retry-after-ms hint present (${r.retryAfterMs})`);
    }
    const gw = await scrape(`${cluster.urls[0]}/metrics`);
    assert.equal(total(gw, "shoal_gateway_admission_rejections_total", { lane: "batch" }), refused.length);
  });
});
