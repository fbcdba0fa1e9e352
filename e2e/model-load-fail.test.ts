/**
 * A worker whose model files are corrupted beside a healthy one (the chaos campaign's
 * `model-load-fail`, as a plain test): every call is answered by the healthy worker, none fails
 * Unavailable, and the broken worker's /readyz says it cannot serve the pool's model.
 *
 * The broken worker sees a corrupted copy bind-mounted over the model's ONNX file in a mount
 * namespace of its own (root and `unshare` needed, else skipped): the same path, size and times,
 * so the same catalog and registry record as the healthy worker. A catalog pointing at a broken
 * copy would not do: a worker whose declaration differs reseeds the pool's shared registry, and
 * every worker would then load the broken copy.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cp, mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { jobsTopic, modelJobsTopic } from "@shoal/common";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ensureModel } from "@shoal/models";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { SERVICE_NODE_FLAGS, ServiceProcess, serviceEntry } from "./harness/service-process.ts";

/** Bytes zeroed at the head of the broken copy: no ONNX parser takes what is left (as e2e/chaos/inject.ts). */
const ZEROED_ONNX_BYTES = 64 * 1024;

/** Whether this process may make a private mount namespace with a bind mount in it. */
function canBindMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync("unshare", ["--mount", "--propagation", "private", "true"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

interface Outcome {
  readonly worker: string;
  readonly code: string;
  readonly message: string;
  /** Times the queue handed the job out, the run included (the answer's timing.deliveries). */
  readonly deliveries: number;
}

async function embed(cluster: TestCluster, text: string): Promise<Outcome> {
  const { inference } = clientsFor(cluster.urls[0]!, "grpc");
  let worker = "";
  try {
    const res = await inference.embed(
      { model: cluster.modelIds[0]!, inputs: [text] },
      { timeoutMs: 60_000, onHeader: (h) => (worker = h.get("shoal-worker") ?? "") },
    );
    return { worker, code: "OK", message: "", deliveries: res.timing?.deliveries ?? 0 };
  } catch (err) {
    const e = ConnectError.from(err);
    return { worker, code: Code[e.code] ?? "?", message: e.rawMessage, deliveries: 0 };
  }
}

describe("a worker whose model cannot load beside a healthy one", { skip: canBindMount() ? false : "needs root and unshare (a private bind mount)" }, () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of cleanup.reverse()) await c();
  });

  for (const jobTopics of ["per-lane", "per-model"] as const) {
    test(`${jobTopics} job topics: every call is answered OK by the healthy worker; the broken one is not ready`, async () => {
      // A private copy of the tiny model: the bind mount covers this copy, never the shared cache.
      const scratch = await mkdtemp(join(tmpdir(), "shoal-load-fail-"));
      cleanup.push(() => rm(scratch, { recursive: true, force: true }));
      const modelDir = join(scratch, "model");
      await cp(await ensureModel("tiny"), modelDir, { recursive: true, preserveTimestamps: true });
      const broken = join(scratch, "broken.onnx");
      await cp(join(modelDir, "model.onnx"), broken, { preserveTimestamps: true });
      const fh = await open(broken, "r+");
      await fh.write(Buffer.alloc(ZEROED_ONNX_BYTES), 0, ZEROED_ONNX_BYTES, 0);
      await fh.close();

      // A small prefetch (as e2e/share-intake.test.ts): a worker takes about one job at a time, so a
      // wave of calls reaches both workers rather than all going to whichever fetch the broker answers.
      const lean = { SHOAL_PREFETCH_TOKENS: "64", SHOAL_IDLE_TAKE_TOKENS: "64" };
      const cluster = await startCluster({ workers: 1, presets: [], modelDirs: [modelDir], intake: "share", partitions: 1, jobTopics, workerEnv: lean });
      cleanup.push(() => cluster.stop());
      const id = `${cluster.pool}-broken`;
      const env = {
        LOG_LEVEL: "info",
        KAFKA_BROKERS: kafkaBrokers(),
        SHOAL_CATALOG: cluster.catalogPath,
        SHOAL_REGISTRY_TOPIC: `shoal.registry.${cluster.pool}`,
        SHOAL_POOL: cluster.pool,
        SHOAL_WORKER_ID: id,
        SHOAL_INFERENCE_THREADS: "1",
        SHOAL_INTRA_OP_THREADS: "1",
        SHOAL_HTTP_PORT: "0",
        ...lean,
      };
      // unshare (no --fork) execs the shell in a mount namespace of its own, which execs node: one pid.
      const mountThenRun = 'mount --bind "$1" "$2" || exit 1; shift 2; exec "$@"';
      const w = ServiceProcess.spawn(
        id,
        "unshare",
        [
          "--mount",
          "--propagation",
          "private",
          "sh",
          "-c",
          mountThenRun,
          "sh",
          broken,
          join(modelDir, "model.onnx"),
          process.execPath,
          ...SERVICE_NODE_FLAGS,
          ...serviceEntry("worker"),
        ],
        env,
      );
      cleanup.push(() => w.stop("SIGTERM"));
      const pulling = await w.waitForLog((l) => l.msg === "worker pulling jobs");
      // Its share of the interactive jobs topic: from then on the broker hands it jobs too.
      const interactive =
        jobTopics === "per-lane" ? jobsTopic(cluster.pool, Lane.INTERACTIVE) : modelJobsTopic(cluster.pool, Lane.INTERACTIVE, cluster.modelIds[0]!);
      await w.waitForLog(
        (l) =>
          l.msg === "kafka-share: assignment" && Array.isArray(l["partitions"]) && l["partitions"].some((p: { topic?: string }) => p.topic === interactive),
        30_000,
      );
      assert.ok(
        w.logs.some((l) => l.msg === "start-up load failed; the model's jobs will retry it"),
        "the broken worker's start-up load failed (the fault took)",
      );

      // Readiness: a worker that can serve none of its pool's models is not ready, and says which failed.
      const ready = await fetch(`http://127.0.0.1:${String(pulling["httpPort"])}/readyz`);
      const readyText = (await ready.text()).trim();
      console.log(`${jobTopics}: broken worker: /readyz ${ready.status} "${readyText}"`);

      // Waves of 4 calls at once, 40 in all, 400 ms apart (about 5 s: past the broken worker's rests
      // and first load backoffs, so it takes jobs again and retries its load): both workers' fetches
      // wait at the broker for each wave.
      const outcomes: Outcome[] = [];
      for (let i = 0; i < 10; i++) {
        outcomes.push(...(await Promise.all(Array.from({ length: 4 }, (_, j) => embed(cluster, `call ${i * 4 + j} of a shoal`)))));
        await new Promise((r) => setTimeout(r, 400));
      }
      const givenBack = w.logs.filter((l) => String(l.msg).startsWith("model could not be loaded here")).length;
      const loadFailures = w.logs.filter((l) => l.msg === "model failed to load").length;
      const byCode = new Map<string, number>();
      for (const o of outcomes) byCode.set(`${o.code}@${o.worker}`, (byCode.get(`${o.code}@${o.worker}`) ?? 0) + 1);
      const byDeliveries = new Map<number, number>();
      for (const o of outcomes) if (o.code === "OK") byDeliveries.set(o.deliveries, (byDeliveries.get(o.deliveries) ?? 0) + 1);
      console.log(
        `${jobTopics}: 40 calls: ${JSON.stringify(Object.fromEntries(byCode))}; answered after n deliveries: ${JSON.stringify(Object.fromEntries([...byDeliveries].sort()))}; broken worker: ${loadFailures} failed loads, ${givenBack} jobs given back`,
      );
      assert.deepEqual(
        outcomes.filter((o) => o.code !== "OK"),
        [],
        `every call answered OK\n${w.warnings(20)}`,
      );
      assert.ok(
        outcomes.every((o) => o.worker === `${cluster.pool}-w0`),
        "the healthy worker answered them all",
      );
      assert.equal(ready.status, 503, "the broken worker is not ready");
      assert.match(readyText, new RegExp(cluster.modelIds[0]!), "its reason names the failing model");
    });
  }
});
