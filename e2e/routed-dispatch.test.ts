import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * Routed dispatch (issue #16): the gateway picks each job's worker and writes it to that worker's
 * own topic; the same workers and the same Kafka path answer it. Two workers on a simulated
 * accelerator, one gateway per policy.
 */
const WORKER_ENV = {
  SHOAL_RUNTIME: "simulated:gpu-a100-bert",
  SHOAL_SIM_DILATION: "10",
  // The profile's 1.5 s load × 10 would take 15 s of each start.
  SHOAL_SIM_LOAD_MS: "10",
  SHOAL_ROUTED_INTAKE: "1",
  // A stopped or killed worker reads as gone within 3 × 100 ms + 2 s of clock slack.
  SHOAL_STATUS_INTERVAL_MS: "100",
};

async function routedCluster(gatewayEnv: Record<string, string>, gateways = 1): Promise<{ cluster: TestCluster; clients: ReturnType<typeof clientsFor>[] }> {
  const cluster = await startCluster({ workers: 2, gateways, workerEnv: WORKER_ENV, gatewayEnv });
  const clients = cluster.urls.map((url) => clientsFor(url, "connect"));
  // Route only once every gateway sees both workers on the status board (each has its own view).
  const deadline = Date.now() + 20_000;
  for (const c of clients) {
    for (;;) {
      const { workers } = await c.cluster.getCluster({});
      if (workers.filter((w) => w.routedIntake).length === 2) break;
      assert.ok(Date.now() < deadline, "a gateway never saw two routed workers");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { cluster, clients };
}

/** Sends `n` embeds at once; the answering worker of each (the `shoal-worker` response header). */
async function embedAll(clients: ReturnType<typeof clientsFor>, model: string, n: number, timeoutMs = 30_000): Promise<string[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      let worker = "";
      const res = await clients.inference.embed(
        { model, inputs: [`routed job ${i}`] },
        {
          timeoutMs,
          onHeader: (h) => {
            worker = h.get("shoal-worker") ?? "";
          },
        },
      );
      assert.equal(res.embeddings.length, 1);
      return worker;
    }),
  );
}

const countsOf = (workers: readonly string[]): Map<string, number> => {
  const m = new Map<string, number>();
  for (const w of workers) m.set(w, (m.get(w) ?? 0) + 1);
  return m;
};

describe("SHOAL_DISPATCH=round-robin", () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;
  before(async () => {
    let all: ReturnType<typeof clientsFor>[];
    ({ cluster, clients: all } = await routedCluster({ SHOAL_DISPATCH: "round-robin" }));
    clients = all[0]!;
  });
  after(async () => {
    await cluster?.stop();
  });

  test("alternates the jobs over both workers, each through its own topic", async () => {
    const [w0, w1] = [`${cluster.pool}-w0`, `${cluster.pool}-w1`];
    const answered = await embedAll(clients, cluster.modelIds[0]!, 20);
    assert.deepEqual(Object.fromEntries(countsOf(answered)), { [w0]: 10, [w1]: 10 });
    const m = await scrape(`${cluster.urls[0]}/metrics`);
    assert.equal(total(m, "shoal_gateway_dispatched_jobs_total", { worker: w0 }), 10);
    assert.equal(total(m, "shoal_gateway_dispatched_jobs_total", { worker: w1 }), 10);
    assert.equal(total(m, "shoal_gateway_dispatched_jobs_total", { worker: "" }), 0, "nothing went to the shared topic");
  });

  test("jobs routed to a SIGSTOPped worker are still answered (written again to the shared topic)", async () => {
    const stopped = cluster.workers[1]!;
    stopped.signal("SIGSTOP");
    try {
      // Sent at once: the board still lists the stopped worker, so half go to its topic.
      const answered = await embedAll(clients, cluster.modelIds[0]!, 6);
      assert.equal(answered.length, 6);
      assert.ok(
        answered.every((w) => w === `${cluster.pool}-w0`),
        `answered by ${answered.join(", ")}`,
      );
      const m = await scrape(`${cluster.urls[0]}/metrics`);
      assert.equal(total(m, "shoal_gateway_rescued_jobs_total", { worker: `${cluster.pool}-w1` }), 3);
    } finally {
      stopped.signal("SIGCONT");
    }
  });
});

describe("SHOAL_DISPATCH=least-loaded (R = 50 ms, own sends counted), two gateways", () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>[];
  before(async () => {
    ({ cluster, clients } = await routedCluster({ SHOAL_DISPATCH: "least-loaded", SHOAL_DISPATCH_REFRESH_MS: "50", SHOAL_DISPATCH_COUNT_OWN: "1" }, 2));
  });
  after(async () => {
    await cluster?.stop();
  });

  test("both gateways spread a burst over both workers", async () => {
    const answered = (await Promise.all(clients.map((c) => embedAll(c, cluster.modelIds[0]!, 20)))).flat();
    const counts = countsOf(answered);
    assert.equal(counts.size, 2, `answered by ${[...counts.keys()].join(", ")}`);
    for (const [w, n] of counts) assert.ok(n >= 10, `${w} answered ${n} of 40`);
    for (const url of cluster.urls) {
      const m = await scrape(`${url}/metrics`);
      assert.equal(total(m, "shoal_gateway_dispatched_jobs_total", { worker: "" }), 0, "nothing went to the shared topic");
      assert.equal(total(m, "shoal_gateway_dispatched_jobs_total"), 20, "each gateway routed its own 20");
    }
  });

  test("jobs routed to a killed worker are still answered", async () => {
    const killed = cluster.workers[0]!;
    await killed.stop("SIGKILL");
    const answered = await embedAll(clients[0]!, cluster.modelIds[0]!, 6);
    assert.ok(
      answered.every((w) => w === `${cluster.pool}-w1`),
      `answered by ${answered.join(", ")}`,
    );
  });
});
