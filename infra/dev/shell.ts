import { spawn, type SpawnOptions } from "node:child_process";
import { readdir } from "node:fs/promises";
import { createServer } from "node:net";
import { join, relative, resolve } from "node:path";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");
export const KAFKA_SH = join(REPO_ROOT, "infra/kafka/kafka.sh");

/** The Node major version the project runs on: the `node` package pinned in package.json. */
export const REQUIRED_NODE_MAJOR = 24;

/**
 * Refuses to go on under another Node than the pinned one. `npm start` / `npm test` put the
 * pinned binary (node_modules/.bin/node) first on PATH; running these scripts with the
 * machine's own node would test something else than what ships.
 */
export function requirePinnedNode(): void {
  const major = Number(process.versions.node.split(".")[0]);
  if (major < REQUIRED_NODE_MAJOR) {
    process.stderr.write(
      `Shoal runs on Node ${REQUIRED_NODE_MAJOR}; this is ${process.version}. Run it through npm (npm start, npm test), which uses the pinned node_modules/.bin/node.\n`,
    );
    process.exit(1);
  }
}

/** Prints a progress line for a long-running step. */
export function step(message: string): void {
  process.stderr.write(`\n==> ${message}\n`);
}

/** Runs a command with inherited stdio; resolves with its exit code. */
export function run(cmd: string, args: readonly string[], opts: SpawnOptions = {}): Promise<number> {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { stdio: "inherit", cwd: REPO_ROOT, ...opts });
    child.once("error", fail);
    child.once("exit", (code, signal) => ok(code ?? (signal ? 128 : 1)));
  });
}

/** Runs a command and throws if it fails. */
export async function mustRun(cmd: string, args: readonly string[], opts: SpawnOptions = {}): Promise<void> {
  const code = await run(cmd, args, opts);
  if (code !== 0) throw new Error(`${cmd} ${args.join(" ")} exited with ${code}`);
}

/** Files under `dir` (recursively, skipping node_modules) whose names end with `suffix`. */
export async function findFiles(dir: string, suffix: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await findFiles(path, suffix)));
    else if (entry.name.endsWith(suffix)) out.push(relative(REPO_ROOT, path));
  }
  return out.sort();
}

/** Resolves whether nothing listens on 127.0.0.1:port. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}
