import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { startScratchBroker, type ScratchBroker } from "../infra/dev/broker.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { has, histogramCount, scrape, total, type Scrape } from "./harness/prometheus.ts";

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await check().catch(() => false)) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what}: not within ${timeoutMs} ms`);
}

const status = async (url: string): Promise<number> => (await fetch(url)).status;

describe("metrics and readiness (own broker, stopped and restarted)", () => {
  let broker: ScratchBroker;
  let cluster: TestCluster;
  let workerUrl: string;
  before(async () => {
    broker = await startScratchBroker();
    cluster = await startCluster({ brokers: broker.brokers });
    const line = await cluster.workers[0]!.waitForLog((l) => l.msg === "worker pulling jobs");
    workerUrl = `http://127.0.0.1:${String(line["httpPort"])}`;
  });
  after(async () => {
    await cluster?.stop();
    await broker?.stop();
  });

  test("/metrics parses as Prometheus text and its counters move as requests flow", async () => {
    const model = cluster.modelIds[0]!;
    const gw0 = await scrape(`${cluster.urls[0]}/metrics`);
    const wk0 = await scrape(`${workerUrl}/metrics`);
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    for (let i = 0; i < 5; i++) await inference.embed({ model, inputs: [`metrics ${i}`, "second text"] });
    await assert.rejects(inference.embed({ model: "nope", inputs: ["x"] }));
    const gw1 = await scrape(`${cluster.urls[0]}/metrics`);
    const wk1 = await scrape(`${workerUrl}/metrics`);

    const delta = (a: Scrape, b: Scrape, name: string, m: Record<string, string> = {}): number => total(b, name, m) - total(a, name, m);
    assert.equal(delta(gw0, gw1, "shoal_gateway_requests_total", { method: "Embed", model, code: "ok" }), 5);
    assert.equal(delta(gw0, gw1, "shoal_gateway_requests_total", { method: "Embed", model: "unknown", code: "NotFound" }), 1);
    const hist = (a: Scrape, b: Scrape, name: string, m: Record<string, string>): number => histogramCount(b, name, m) - histogramCount(a, name, m);
    assert.equal(hist(gw0, gw1, "shoal_gateway_request_duration_seconds", { method: "Embed", model, code: "ok" }), 5);
    assert.equal(delta(wk0, wk1, "shoal_worker_jobs_total", { model, status: "OK" }), 5);
    assert.equal(delta(wk0, wk1, "shoal_worker_items_computed_total", { model }), 10);
    assert.ok(delta(wk0, wk1, "shoal_worker_tokens_total", { model }) >= 10 * 3);
    assert.ok(hist(wk0, wk1, "shoal_worker_batch_items", { model }) >= 1, "batch histogram observed");
    assert.equal(total(wk1, "shoal_worker_models_resident"), 1);
    for (const name of ["nodejs_eventloop_lag_seconds", "shoal_gateway_inflight_jobs"]) {
      assert.ok(has(gw1, name), `gateway exposes ${name}`);
    }
    for (const name of [
      "shoal_worker_consumer_lag",
      "shoal_worker_batch_padding_fraction",
      "shoal_worker_inference_seconds",
      "shoal_worker_model_cold_start_seconds",
    ]) {
      assert.ok(has(wk1, name), `worker exposes ${name}`);
    }
  });

  test("readiness flips when the broker stops and back when it returns", async () => {
    const gw = `${cluster.urls[0]}/readyz`;
    const wk = `${workerUrl}/readyz`;
    assert.equal(await status(gw), 200);
    assert.equal(await status(wk), 200);
    await broker.pause();
    const downMs = await waitFor("gateway and worker report not ready", async () => (await status(gw)) === 503 && (await status(wk)) === 503, 20_000);
    assert.equal(await status(`${cluster.urls[0]}/healthz`), 200, "still alive");
    await broker.resume();
    const upMs = await waitFor("gateway and worker report ready again", async () => (await status(gw)) === 200 && (await status(wk)) === 200, 60_000);
    console.log(`readiness: not ready ${downMs} ms after the broker stopped; ready ${upMs} ms after it returned`);
    const { inference } = clientsFor(cluster.urls[0]!, "connect");
    const model = cluster.modelIds[0]!;
    // The cluster serves again (the first calls may still see the group rejoining).
    await waitFor(
      "an Embed succeeds after the outage",
      async () => {
        try {
          return (await inference.embed({ model, inputs: ["back"] }, { timeoutMs: 5_000 })).embeddings.length === 1;
        } catch (err) {
          if (ConnectError.from(err).code === Code.Internal) throw err;
          return false;
        }
      },
      60_000,
    );
  });
});
