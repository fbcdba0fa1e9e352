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
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ensureModel } from "@shoal/models";
import { startScratchBroker, type ScratchBroker } from "./broker.ts";
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
const nodeTest = (list: readonly string[], testEnv: NodeJS.ProcessEnv): Promise<number> =>
  run(process.execPath, ["--import", "tsx", "--test", "--test-concurrency=1", "--test-timeout=600000", ...reporters, ...list], { env: testEnv });

// The unit files first, without a broker, then the e2e files on their scratch broker; both one file
// at a time. Two unit files at a time took that phase from 140 s to 86 on two cores, but one CI run
// in three failed a timing assertion under it, and a flaky CI lands nothing.
const unitPart = files.filter((f) => !f.startsWith("e2e"));
const e2ePart = files.filter((f) => f.startsWith("e2e"));
let code = 0;
if (unitPart.length > 0) {
  step(`running ${unitPart.length} unit test files`);
  code = await nodeTest(unitPart, env);
}
if (needsBroker) {
  const broker: ScratchBroker = await startScratchBroker(process.env["SHOAL_TEST_KAFKA_PORT"]);
  try {
    step(`running ${e2ePart.length} e2e test files`);
    const e2eCode = await nodeTest(e2ePart, { ...env, KAFKA_BROKERS: broker.brokers });
    code ||= e2eCode;
  } finally {
    await broker.stop();
  }
}
process.exit(code);
