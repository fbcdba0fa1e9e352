/**
 * `npm test`: every test of the project. Unit tests first, then the e2e suite against a real
 * Kafka broker started for this run on its own port and data folder (removed afterwards), so a
 * running dev cluster is never touched.
 *
 *   npm test                # all
 *   npm test -- --unit      # unit tests only (no broker)
 *   npm test -- e2e/x.test.ts   # chosen files (a broker is started if any is under e2e/)
 *
 * The scratch broker takes a free port (SHOAL_TEST_KAFKA_PORT to choose one), so runs can overlap.
 * The e2e files run in two lanes side by side (SHOAL_TEST_E2E_LANES), each on a scratch broker of
 * its own, balanced by the times the last runs on this machine recorded; the few files that time
 * their callers' latency run after the lanes, alone. The e2e tests run the gateway and worker from
 * bundles built at the start (SHOAL_TEST_SERVICES=source: from the sources, under tsx).
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { ensureModel } from "@shoal/models";
import { buildServices } from "../image/build-services.ts";
import { startScratchBroker, type ScratchBroker } from "./broker.ts";
import { readFileTimes } from "./file-times.ts";
import { balanceLanes, runLabelled } from "./lanes.ts";
import { findFiles, mustRun, REPO_ROOT, requirePinnedNode, run, step } from "./shell.ts";

requirePinnedNode();
step(`Shoal tests on Node ${process.version} (${process.execPath})`);

const args = process.argv.slice(2);
const unitOnly = args.includes("--unit");
const chosen = args.filter((a) => !a.startsWith("--"));

const unitFiles = [...(await findFiles(join(REPO_ROOT, "services"), ".test.ts")), ...(await findFiles(join(REPO_ROOT, "infra"), ".test.ts"))];
const e2eFiles = await findFiles(join(REPO_ROOT, "e2e"), ".test.ts");
const files = chosen.length > 0 ? chosen : unitOnly ? unitFiles : [...unitFiles, ...e2eFiles];
const needsBroker = files.some((f) => f.startsWith("e2e"));

if (needsBroker) {
  step("system packages for the browser and Python e2e tests");
  await mustRun("bash", [join(REPO_ROOT, "infra/dev/setup-system.sh")]);
}

step("test models (generated once into the cache)");
const tiny = await ensureModel("tiny", { onResult: (built) => console.error(built ? "built tiny model" : "tiny model cached") });
console.error(tiny);

if (needsBroker) {
  // The tracing tests start their own Jaeger; build it once (cached by version, ~12 min cold).
  step("Jaeger binary (built once from the Go module proxy, cached)");
  await mustRun("bash", [join(REPO_ROOT, "infra/jaeger/jaeger.sh"), "build"]);
}

if (needsBroker && !existsSync(join(REPO_ROOT, "services/console/dist/index.html"))) {
  // The gateway serves the built console at /console/ (e2e/console.test.ts); dist/ is not committed.
  step("web console (services/console/dist missing: building it)");
  await mustRun("npm", ["run", "build", "-w", "services/console"]);
}

// The e2e tests start a few hundred gateways and workers: from bundles built once here (what the
// image ships; about 1 s of CPU to start against 2.3 s under tsx), unless SHOAL_TEST_SERVICES=source.
let servicesDir: string | undefined;
if (needsBroker && process.env["SHOAL_TEST_SERVICES"] !== "source") {
  step("gateway and worker bundles for the e2e tests (npm run build:services into a scratch folder; SHOAL_TEST_SERVICES=source runs the sources under tsx)");
  // Inside the clone (gitignored), so the packages left out of the bundles resolve from its node_modules.
  servicesDir = await mkdtemp(join(REPO_ROOT, ".tmp-built-test-"));
  const started = performance.now();
  await buildServices(servicesDir, { assets: true });
  console.error(`built in ${((performance.now() - started) / 1000).toFixed(1)} s: ${servicesDir}`);
}

// kafkajs computes a negative setTimeout in its request queue on Node 24 (clamped to 1 ms, harmless):
// the services already run with this warning off; test files and the attackers and benches they
// spawn inherit it through NODE_OPTIONS.
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_OPTIONS: [process.env["NODE_OPTIONS"], "--disable-warning=TimeoutNegativeWarning"].filter(Boolean).join(" "),
};
// The spec reporter as usual, and the slowest files at the end (where CI's time goes).
const reporters = [
  "--test-reporter=spec",
  "--test-reporter-destination=stdout",
  `--test-reporter=${join(REPO_ROOT, "infra/dev/file-times-reporter.ts")}`,
  "--test-reporter-destination=stdout",
];
const nodeTestArgs = (list: readonly string[]): string[] => [
  "--import",
  "tsx",
  "--test",
  "--test-concurrency=1",
  "--test-timeout=600000",
  ...reporters,
  ...list,
];
const nodeTest = (list: readonly string[], testEnv: NodeJS.ProcessEnv): Promise<number> => run(process.execPath, nodeTestArgs(list), { env: testEnv });

/** SHOAL_TEST_E2E_LANES: how many e2e lanes run side by side (default 2; 1 runs the files one at a time). */
function e2eLanes(): number {
  const raw = process.env["SHOAL_TEST_E2E_LANES"] ?? "2";
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 4) throw new Error(`SHOAL_TEST_E2E_LANES must be an integer from 1 to 4, not ${JSON.stringify(raw)}`);
  return n;
}

/**
 * E2e files that assert their callers' latency (p99 bounds under attack): they run after the lanes,
 * with nothing beside them, because another lane's load on the two cores is not what they measure.
 */
const ALONE: ReadonlySet<string> = new Set(["e2e/adversarial.test.ts"]);

// The unit files first, without a broker, one file at a time: two at a time took that phase from
// 140 s to 86 on two cores, but one CI run in three failed a timing assertion under it, and a flaky
// CI lands nothing. Then the e2e files: in lanes, each one file at a time on a broker of its own
// (most e2e time is waiting on timeouts, rebalances and restarts, which two lanes overlap), then the
// ALONE files on the first lane's broker.
const unitPart = files.filter((f) => !f.startsWith("e2e"));
const e2ePart = files.filter((f) => f.startsWith("e2e"));
let code = 0;
if (unitPart.length > 0) {
  step(`running ${unitPart.length} unit test files`);
  code = await nodeTest(unitPart, env);
}
if (needsBroker) {
  const alone = e2ePart.filter((f) => ALONE.has(f));
  // balanceLanes leaves a lane empty when there are fewer files than lanes: those are dropped.
  const laned = balanceLanes(
    e2ePart.filter((f) => !ALONE.has(f)),
    await readFileTimes(),
    e2eLanes(),
  ).filter((lane) => lane.length > 0);
  const brokers: ScratchBroker[] = [];
  try {
    // One after the other: each picks a free port, and a broker that is up holds its own.
    for (let i = 0; i < Math.max(1, laned.length); i++) brokers.push(await startScratchBroker(i === 0 ? process.env["SHOAL_TEST_KAFKA_PORT"] : undefined));
    const envOf = (b: ScratchBroker): NodeJS.ProcessEnv => ({
      ...env,
      KAFKA_BROKERS: b.brokers,
      ...(servicesDir === undefined ? {} : { SHOAL_TEST_SERVICES_DIR: servicesDir }),
    });
    if (laned.length === 1) {
      step(`running ${laned[0]?.length} e2e test files`);
      const laneCode = await nodeTest(laned[0] ?? [], envOf(brokers[0] as ScratchBroker));
      code ||= laneCode;
    } else if (laned.length > 1) {
      step(
        `running ${e2ePart.length - alone.length} e2e test files in ${laned.length} lanes side by side: ${laned.map((l, i) => `[e2e ${i + 1}] ${l.length} files`).join(", ")}`,
      );
      const started = performance.now();
      const codes = await Promise.all(
        laned.map(async (lane, i) => {
          const laneCode = await runLabelled(`[e2e ${i + 1}]`, process.execPath, nodeTestArgs(lane), envOf(brokers[i] as ScratchBroker));
          process.stderr.write(`[e2e ${i + 1}] lane done after ${((performance.now() - started) / 1000).toFixed(0)} s, exit ${laneCode}\n`);
          return laneCode;
        }),
      );
      code ||= codes.find((c) => c !== 0) ?? 0;
    }
    if (alone.length > 0) {
      step(`running ${alone.length} e2e test file(s) that time their callers, alone: ${alone.join(" ")}`);
      // Run even when a lane failed (`code ||= await ...` would skip it): every file reports.
      const aloneCode = await nodeTest(alone, envOf(brokers[0] as ScratchBroker));
      code ||= aloneCode;
    }
  } finally {
    for (const b of brokers) await b.stop();
    if (servicesDir !== undefined) await rm(servicesDir, { recursive: true, force: true });
  }
}
process.exit(code);
