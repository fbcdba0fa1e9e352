/**
 * `npm start`: the whole local cluster in one command — a Kafka broker (fetched from Maven
 * Central once, cached), the default model (generated once, cached), one worker and one gateway.
 * Logs go to .shoal/logs/; Ctrl-C stops everything gracefully.
 *
 * Environment: SHOAL_PORT (gateway, default 8080), KAFKA_PORT (default 9092), SHOAL_WORKERS
 * (default 1), SHOAL_MODEL_PRESET (a generated preset; default: the pretrained all-MiniLM-L6-v2
 * when built, else the generated 'mini'), SHOAL_CATALOG (serve your own catalog instead),
 * SHOAL_TRACING=1 (also start Jaeger on 127.0.0.1:16686 and export every span to it).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { ensureModel, findPretrained } from "@shoal/models";
import { KAFKA_SH, REPO_ROOT, mustRun, requirePinnedNode, step } from "./shell.ts";

requirePinnedNode();

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
  // The real all-MiniLM-L6-v2 when it has been built (npm run models:pretrained, or by npm test);
  // else the generated MiniLM-shaped encoder, which builds in a second.
  const pretrained = preset === undefined ? await findPretrained() : undefined;
  step(pretrained ? "default model: all-MiniLM-L6-v2 (pretrained)" : `default model (generated preset '${preset ?? "mini"}')`);
  const dir = pretrained ?? (await ensureModel(preset ?? "mini", { onResult: (built) => console.error(built ? "generated" : "cached") }));
  catalog = join(runDir, "catalog.yaml");
  await writeFile(catalog, `# Written by npm start.\npools:\n  default:\n    intake: share\nmodels:\n  - path: ${JSON.stringify(dir)}\n    pool: default\n`);
  console.error(`model ${dir}\ncatalog ${catalog}`);
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
      children.map((c) => (c.exitCode === null ? new Promise((r) => (c.once("exit", r), c.kill("SIGTERM"))) : undefined)),
    );
  }
  process.exit(code);
}
process.once("SIGINT", () => void stopAll(0));
process.once("SIGTERM", () => void stopAll(0));

try {
  step(`${workers} worker(s)`);
  await Promise.all(Array.from({ length: workers }, (_, i) => startService("worker", `worker-${i}`, { SHOAL_WORKER_ID: `worker-${i}`, SHOAL_HTTP_PORT: String(9464 + i) }, "worker pulling jobs")));
  step("gateway");
  const ready = await startService("gateway", "gateway", { SHOAL_PORT: port }, "gateway serving");
  const model = (ready["models"] as string[])[0];
  console.log(`
Shoal is up.
  gateway   http://127.0.0.1:${port}  (Connect, gRPC and gRPC-Web on one port)
  console   http://127.0.0.1:${port}/console/
  kafka     127.0.0.1:${kafkaPort}
  metrics   http://127.0.0.1:${port}/metrics, worker(s) http://127.0.0.1:9464/metrics ...
  traces    ${tracing ? "Jaeger query API http://127.0.0.1:16686/api/traces?service=shoal-gateway" : "off (SHOAL_TRACING=1 npm start to turn on)"}
  logs      ${logDir}

Try it:
  curl -s http://127.0.0.1:${port}/shoal.v1.InferenceService/Embed \\
    -H 'content-type: application/json' \\
    -d '{"model":"${model}","inputs":["hello world"]}' | head -c 300; echo
  npx buf curl --http2-prior-knowledge --schema proto \\
    -d '{"model":"${model}","inputs":["hello world"]}' http://127.0.0.1:${port}/shoal.v1.InferenceService/Embed

Ctrl-C stops the gateway and workers.`);
} catch (err) {
  console.error(String(err));
  await stopAll(1);
}
