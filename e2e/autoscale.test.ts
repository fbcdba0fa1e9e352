/**
 * KEDA's decision, fed by a loaded cluster (issue #20): the base manifests' ScaledObject (target
 * jobs waiting per replica, min/max, scale-up and scale-down behaviour) drives real worker
 * processes through the HPA's algorithm (e2e/harness/hpa.ts), reading the gateway's
 * `shoal_gateway_queue_lag_records` for the pool, as the ScaledObject's Prometheus query does.
 * Virtual time runs 60× faster than the wall clock, so ten minutes of stabilization take ten
 * seconds. Under a load two workers cannot keep up with, the replicas rise; once it stops they
 * return to the minimum, one per scale-down period; every call is answered (a worker scaled away
 * drains first).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { ReplicaDecider, readScaledObject } from "./harness/hpa.ts";
import { scrape } from "./harness/prometheus.ts";
import type { ServiceProcess } from "./harness/service-process.ts";

const SPEEDUP = 60;
const spec = readScaledObject(join(import.meta.dirname, "../infra/k8s/base/worker-cpu.yaml"));
// Six worker processes at most on a 2-core test machine (the manifest allows 32).
const MAX_TEST_REPLICAS = 6;

describe("autoscaling: the ScaledObject's decisions follow the share group's backlog", () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await startCluster({
      workers: spec.minReplicas,
      presets: ["tiny"],
      // One job per call on a simulated device: a worker serves ~5 jobs/s, so the backlog is the
      // offered load's excess, not hidden by batching.
      // A start of 30 ms × 80 = 2.4 s wall, 2.4 min virtual (as a pod's), not the profile's 114 ms × 80.
      workerEnv: { SHOAL_RUNTIME: "simulated:cpu-minilm", SHOAL_SIM_DILATION: "80", SHOAL_SIM_LOAD_MS: "30", SHOAL_BATCH_MAX_ITEMS: "1" },
    });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("replicas rise under a backlog and fall back to the minimum after it, one per period; no call lost", { timeout: 240_000 }, async () => {
    const decider = new ReplicaDecider({ ...spec, maxReplicas: Math.min(spec.maxReplicas, MAX_TEST_REPLICAS) }, spec.minReplicas);
    // Replicas as pods: a new one counts from the decision on, while it starts (as a pending pod does).
    const workers: Promise<ServiceProcess>[] = cluster.workers.map((w) => Promise.resolve(w));
    const stopping: Promise<unknown>[] = [];
    const timeline: string[] = [];
    const samples: string[] = [];
    const startedAt = performance.now();
    const virtualS = (): number => ((performance.now() - startedAt) / 1000) * SPEEDUP;
    const lagOf = async (): Promise<number> => {
      let sum = 0;
      for (const line of (await scrape(`${cluster.urls[0]}/metrics`)).text.split("\n"))
        if (line.startsWith("shoal_gateway_queue_lag_records{") && line.includes(`pool="${cluster.pool}"`))
          sum += Number(line.slice(line.lastIndexOf(" ") + 1));
      return sum;
    };
    let loadOn = true;
    let maxSeen = spec.minReplicas;
    const scaler = (async () => {
      for (;;) {
        const lag = await lagOf();
        samples.push(`${virtualS().toFixed(0)}:${lag}/${workers.length}`);
        const want = decider.decide(virtualS(), lag);
        if (want !== workers.length) timeline.push(`${virtualS().toFixed(0)} s: backlog ${lag} → ${want} replicas`);
        while (workers.length < want) workers.push(cluster.startWorker());
        while (workers.length > want) stopping.push(workers.pop()!.then((w) => w.stop("SIGTERM")));
        maxSeen = Math.max(maxSeen, workers.length);
        if (!loadOn && lag === 0 && workers.length === spec.minReplicas) return;
        if (virtualS() > 60 * 60)
          throw new Error(`no return to ${spec.minReplicas} replicas within an hour of virtual time: ${timeline.join("; ")}; samples ${samples.join(" ")}`);
        await new Promise((r) => setTimeout(r, (spec.pollingSeconds * 1000) / SPEEDUP));
      }
    })();

    // ~40 jobs/s for 20 s against two workers serving ~5 each: a backlog of hundreds.
    // Eight connections: one HTTP/2 connection would keep at most 128 calls open (the stream cap)
    // and hold the rest of the backlog in the client, where no scaler sees it.
    const clients = Array.from({ length: 8 }, () => clientsFor(cluster.urls[0]!, "grpc").inference);
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < 800; i++) {
      calls.push(clients[i % clients.length]!.embed({ model: cluster.modelIds[0]!, inputs: [`autoscale ${i}`] }, { timeoutMs: 180_000 }));
      await new Promise((r) => setTimeout(r, 25));
    }
    const answers = await Promise.allSettled(calls);
    loadOn = false;
    await scaler;
    await Promise.all([...stopping, ...workers]);
    console.error(`autoscale: ${timeline.join("; ")}`);
    const failed = answers.filter((a) => a.status === "rejected");
    assert.equal(failed.length, 0, `calls failed: ${failed.slice(0, 3).map((f) => String((f as PromiseRejectedResult).reason))}`);
    assert.ok(maxSeen >= spec.minReplicas + 2, `replicas rose to ${maxSeen} under the backlog (timeline: ${timeline.join("; ")})`);
    assert.equal(workers.length, spec.minReplicas, "back to the minimum");
    // Scale-down one pod per period: every decrease in the timeline is by one.
    const counts = timeline.map((t) => Number(/→ (\d+) replicas/.exec(t)![1]));
    for (let i = 1; i < counts.length; i++)
      if (counts[i]! < counts[i - 1]!) assert.equal(counts[i - 1]! - counts[i]!, spec.scaleDown.pods, timeline.join("; "));
  });
});
