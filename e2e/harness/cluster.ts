import { randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureModel } from "@shoal/models";
import { ServiceProcess } from "./service-process.ts";

/** The broker the tests and benchmarks use (the test runner sets KAFKA_BROKERS). */
export function kafkaBrokers(): string {
  return process.env["KAFKA_BROKERS"] ?? "127.0.0.1:19092";
}

export interface ClusterOptions {
  readonly gateways?: number;
  readonly workers?: number;
  /** Generator presets to serve (default: the tiny test encoder). */
  readonly presets?: readonly string[];
  /** Model directories served besides the presets (hand-made test models). */
  readonly modelDirs?: readonly string[];
  /** Extra catalog fields for every model, e.g. `{ memory: "10MiB" }`. */
  readonly modelFields?: Readonly<Record<string, string>>;
  /** Catalog entries with fields of their own (an id, a runtime), served besides the above. */
  readonly entries?: readonly CatalogEntry[];
  /**
   * Composite models (catalog `biEncoder` / `zeroShot` entries, e.g. `{ id, biEncoder: { embedder } }`)
   * served in the test pool over the embedders above.
   */
  readonly composites?: readonly Readonly<Record<string, unknown>>[];
  /** Partitions of the pool's jobs topics (default: 1 with share intake, 4 with group intake). */
  readonly partitions?: number;
  /** How workers take jobs (default `SHOAL_TEST_INTAKE`, else `share`). */
  readonly intake?: "share" | "group";
  /** The pool's jobs topics: one per lane (default) or one per model and lane (share intake). */
  readonly jobTopics?: "per-lane" | "per-model";
  readonly gatewayEnv?: Record<string, string>;
  /** Env of gateway `i` alone, over `gatewayEnv` (e.g. one gateway with a feature off, for an A/B). */
  readonly gatewayEnvAt?: (i: number) => Record<string, string>;
  readonly workerEnv?: Record<string, string>;
  /** Bootstrap brokers (default: the test run's broker, KAFKA_BROKERS). */
  readonly brokers?: string;
  /** Run the compiled services in this folder (`npm run build:services`) instead of the sources. */
  readonly builtDir?: string;
}

/** One catalog entry: a model directory and its own fields. */
export interface CatalogEntry {
  readonly dir: string;
  readonly fields: Readonly<Record<string, string>>;
}

export interface TestCluster {
  /** Unique per cluster, so each test has its own topics and consumer groups. */
  readonly pool: string;
  readonly catalogPath: string;
  readonly gateways: ServiceProcess[];
  readonly workers: ServiceProcess[];
  readonly urls: string[];
  readonly modelIds: string[];
  startWorker(env?: Record<string, string>): Promise<ServiceProcess>;
  stop(): Promise<void>;
}

/** The intake e2e clusters use unless a test picks one: `SHOAL_TEST_INTAKE=group npm test` runs the suite on consumer groups. */
export function testIntake(): "share" | "group" {
  return process.env["SHOAL_TEST_INTAKE"] === "group" ? "group" : "share";
}

/** Writes a catalog serving the given presets in one uniquely named pool. */
export async function writeCatalog(
  presets: readonly string[],
  partitions: number,
  intake: "share" | "group" = testIntake(),
  modelFields: Readonly<Record<string, string>> = {},
  modelDirs: readonly string[] = [],
  entries: readonly CatalogEntry[] = [],
  jobTopics: "per-lane" | "per-model" = "per-lane",
  composites: readonly Readonly<Record<string, unknown>>[] = [],
): Promise<{ path: string; pool: string; dirs: string[] }> {
  const dirs = [...(await Promise.all(presets.map((p) => ensureModel(p)))), ...modelDirs];
  const pool = `t${randomBytes(4).toString("hex")}`;
  const dir = await mkdtemp(join(tmpdir(), "shoal-e2e-"));
  const path = join(dir, "catalog.yaml");
  const fieldsOf = (fields: Readonly<Record<string, string>>): string =>
    Object.entries(fields)
      .map(([k, v]) => `\n    ${k}: ${v}`)
      .join("");
  const models = [
    ...dirs.map((d) => `  - path: ${JSON.stringify(d)}\n    pool: ${pool}${fieldsOf(modelFields)}`),
    ...entries.map((e) => `  - path: ${JSON.stringify(e.dir)}\n    pool: ${pool}${fieldsOf(e.fields)}`),
    // JSON is YAML: a composite's nested labels need no hand-written indentation.
    ...composites.map((c) => `  - ${JSON.stringify({ ...c, pool })}`),
  ].join("\n");
  await writeFile(path, `pools:\n  ${pool}:\n    intake: ${intake}\n    partitions: ${partitions}\n    jobTopics: ${jobTopics}\nmodels:\n${models}\n`);
  return { path, pool, dirs };
}

/** Starts gateways and workers as separate processes against the test broker. */
export async function startCluster(opts: ClusterOptions = {}): Promise<TestCluster> {
  const presets = opts.presets ?? ["tiny"];
  const intake = opts.intake ?? testIntake();
  const { path: catalogPath, pool } = await writeCatalog(
    presets,
    opts.partitions ?? (intake === "share" ? 1 : 4),
    intake,
    opts.modelFields,
    opts.modelDirs,
    opts.entries,
    opts.jobTopics,
    opts.composites,
  );
  // A model registry of its own per test cluster: clusters on one broker never see each other's models.
  const common = { KAFKA_BROKERS: opts.brokers ?? kafkaBrokers(), SHOAL_CATALOG: catalogPath, SHOAL_REGISTRY_TOPIC: `shoal.registry.${pool}` };
  const workers: ServiceProcess[] = [];
  const gateways: ServiceProcess[] = [];
  let n = 0;
  async function startWorker(env: Record<string, string> = {}): Promise<ServiceProcess> {
    const id = `${pool}-w${n++}`;
    const w = ServiceProcess.start(
      "worker",
      id,
      {
        ...common,
        SHOAL_POOL: pool,
        SHOAL_WORKER_ID: id,
        // Lean test workers (several share two cores): one session per model, one thread each.
        SHOAL_INFERENCE_THREADS: "1",
        SHOAL_INTRA_OP_THREADS: "1",
        SHOAL_HTTP_PORT: "0",
        ...opts.workerEnv,
        ...env,
      },
      opts.builtDir,
    );
    workers.push(w);
    await w.waitForLog((l) => l.msg === "worker pulling jobs");
    return w;
  }
  try {
    await Promise.all(Array.from({ length: opts.workers ?? 1 }, () => startWorker()));
    const started = await Promise.all(
      Array.from({ length: opts.gateways ?? 1 }, async (_, i) => {
        const g = ServiceProcess.start(
          "gateway",
          `${pool}-g${i}`,
          {
            ...common,
            SHOAL_PORT: "0",
            SHOAL_INSTANCE_ID: `${pool}-g${i}`,
            ...opts.gatewayEnv,
            ...opts.gatewayEnvAt?.(i),
          },
          opts.builtDir,
        );
        gateways.push(g);
        const line = await g.waitForLog((l) => l.msg === "gateway serving");
        return `http://127.0.0.1:${String(line["port"])}`;
      }),
    );
    const modelLine = await gateways[0]!.waitForLog((l) => l.msg === "gateway serving");
    return {
      pool,
      catalogPath,
      gateways,
      workers,
      urls: started,
      modelIds: modelLine["models"] as string[],
      startWorker,
      async stop() {
        await Promise.all([...gateways, ...workers].map((p) => p.stop("SIGTERM")));
      },
    };
  } catch (err) {
    await Promise.all([...gateways, ...workers].map((p) => p.stop("SIGKILL")));
    throw err;
  }
}

/** A started worker's /metrics address (its HTTP port is picked at start and logged). */
export async function workerMetricsUrl(worker: ServiceProcess): Promise<string> {
  const line = await worker.waitForLog((l) => l.msg === "worker pulling jobs");
  return `http://127.0.0.1:${String(line["httpPort"])}/metrics`;
}
