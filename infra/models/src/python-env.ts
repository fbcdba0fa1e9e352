/**
 * Python virtual environments built from a pinned requirements file, cached under
 * `${SHOAL_CACHE:-$HOME/.cache/shoal}/pyenv-<name>-<hash>/`, where the hash covers the file's
 * requirement lines (not its comments), the Python version and the machine. Old environments are
 * not deleted (another checkout may still use one): remove stale `pyenv-*` folders by hand. Like model directories, an environment is built in a
 * temporary sibling, gets a `.complete` marker and is renamed into place; builders on one machine
 * take turns through a lock (build-lock.ts), and the rename keeps others safe too. Always run it as `<dir>/bin/python` (or `python -m pip`): the
 * console scripts in `bin/` keep the temporary path in their shebang lines.
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { access, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { withBuildLock } from "./build-lock.ts";
import { COMPLETE_MARKER, shoalCacheRoot } from "./ensure-model.ts";

/** A built environment. */
export interface PythonEnv {
  readonly dir: string;
  /** `<dir>/bin/python`. */
  readonly python: string;
}

export interface PythonEnvOptions {
  /** Cache root (default shoalCacheRoot()). */
  root?: string;
  /** Interpreter that creates the venv (default `$SHOAL_PYTHON`, else `python3`); 3.10 or newer. */
  python?: string;
  /** Progress lines: steps, pip's output, a heartbeat every 30 s. */
  log?: (line: string) => void;
  /** Called with true when this call built the environment, false when it was cached. */
  onResult?: (built: boolean) => void;
}

/** A Python command that exited non-zero; `output` holds its last lines. */
export class PythonCommandError extends Error {
  override readonly name = "PythonCommandError";
  constructor(
    readonly command: string,
    readonly code: number,
    readonly output: readonly string[],
  ) {
    super(`${command} exited with ${code}:\n${output.map((l) => `  ${l}`).join("\n")}`);
  }
}

const HEARTBEAT_MS = 30_000;
const KEPT_LINES = 40;

/**
 * Runs a command, passing each output line (stdout and stderr) to `log` with a prefix.
 * @throws PythonCommandError when it exits non-zero, with its last lines
 */
export function runLogged(
  cmd: string,
  args: readonly string[],
  opts: { log: (line: string) => void; prefix?: string; cwd?: string; env?: NodeJS.ProcessEnv },
): Promise<void> {
  const prefix = opts.prefix ?? "    ";
  const started = performance.now();
  const tail: string[] = [];
  return new Promise((resolve, reject) => {
    // Unbuffered, so progress lines (pip's, the exporter's) arrive as they are printed.
    const env = { ...(opts.env ?? process.env), PYTHONUNBUFFERED: "1" };
    const child = spawn(cmd, args, { cwd: opts.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    const heartbeat = setInterval(() => {
      opts.log(`${prefix}... still running (${Math.round((performance.now() - started) / 1000)} s)`);
    }, HEARTBEAT_MS);
    const onData = (() => {
      let partial = "";
      return (chunk: Buffer): void => {
        const lines = (partial + chunk.toString("utf8")).split(/\r?\n|\r/);
        partial = lines.pop() ?? "";
        for (const line of lines) {
          if (line.trim() === "") continue;
          tail.push(line);
          if (tail.length > KEPT_LINES) tail.shift();
          opts.log(`${prefix}${line}`);
        }
      };
    })();
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("error", (err) => {
      clearInterval(heartbeat);
      reject(err);
    });
    child.once("close", (code, signal) => {
      clearInterval(heartbeat);
      if (code === 0) resolve();
      else reject(new PythonCommandError(`${cmd} ${args.join(" ")}`, code ?? (signal ? 128 : 1), tail));
    });
  });
}

/** Output of a short command (throws on failure). */
function capture(cmd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString("utf8");
    });
    child.stderr.on("data", (c: Buffer) => {
      err += c.toString("utf8");
    });
    child.once("error", (e) => reject(new Error(`cannot run ${cmd}: ${e.message} (set SHOAL_PYTHON to a Python 3.10+ interpreter)`, { cause: e })));
    child.once("close", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}: ${err.trim()}`))));
  });
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Interpreter identity that the environment's hash covers, e.g. `3.11.7 x86_64 linux`. */
async function interpreterTag(python: string): Promise<string> {
  const tag = await capture(python, ["-c", "import platform, sys; print(platform.python_version(), platform.machine(), sys.platform)"]);
  const [major, minor] = tag.split(/[ .]/).map(Number);
  if (major !== 3 || minor === undefined || minor < 10) throw new Error(`${python} is Python ${tag}; 3.10 or newer is needed (set SHOAL_PYTHON)`);
  return tag;
}

/**
 * The requirement lines of a requirements file, without comments and blank lines: what the
 * environment's hash covers, so editing a comment does not build a new (multi-GB) environment.
 */
export async function requirementLines(requirementsFile: string): Promise<string> {
  return (await readFile(requirementsFile, "utf8"))
    .split("\n")
    .map((line) => line.replace(/(^|\s)#.*$/, "").trim())
    .filter((line) => line !== "")
    .join("\n");
}

/** Directory the environment of `name` + requirements would have (without building it). */
export async function pythonEnvDir(name: string, requirementsFile: string, options: Pick<PythonEnvOptions, "root" | "python"> = {}): Promise<string> {
  const python = options.python ?? process.env.SHOAL_PYTHON ?? "python3";
  const hash = createHash("sha256")
    .update(await requirementLines(requirementsFile))
    .update("\0")
    .update(await interpreterTag(python))
    .digest("hex")
    .slice(0, 12);
  return join(options.root ?? shoalCacheRoot(), `pyenv-${name}-${hash}`);
}

const inFlight = new Map<string, Promise<PythonEnv>>();

/**
 * Returns the environment for `requirementsFile`, creating it with `python -m venv` and
 * `pip install -r` first if it is missing.
 */
export async function ensurePythonEnv(name: string, requirementsFile: string, options: PythonEnvOptions = {}): Promise<PythonEnv> {
  const python = options.python ?? process.env.SHOAL_PYTHON ?? "python3";
  const dir = await pythonEnvDir(name, requirementsFile, { ...options, python });
  const pending = inFlight.get(dir);
  if (pending)
    return pending.then((env) => {
      options.onResult?.(false);
      return env;
    });
  const p = buildIfMissing(dir, python, requirementsFile, options).finally(() => inFlight.delete(dir));
  inFlight.set(dir, p);
  return p;
}

async function buildIfMissing(dir: string, python: string, requirementsFile: string, options: PythonEnvOptions): Promise<PythonEnv> {
  const env = { dir, python: join(dir, "bin", "python") };
  if (await exists(join(dir, COMPLETE_MARKER))) {
    options.onResult?.(false);
    return env;
  }
  const log = options.log ?? (() => {});
  await mkdir(join(dir, ".."), { recursive: true });
  const built = await withBuildLock(
    `${dir}.lock`,
    async () => {
      // Whoever held the lock may have just built it.
      if (await exists(join(dir, COMPLETE_MARKER))) return false;
      return build(dir, python, requirementsFile, log);
    },
    (holder) => log(`  waiting for ${holder}, which is building this environment`),
  );
  options.onResult?.(built);
  return env;
}

/** Builds the environment in a temporary sibling and renames it to `dir`; false if another copy won. */
async function build(dir: string, python: string, requirementsFile: string, log: (line: string) => void): Promise<boolean> {
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const t0 = performance.now();
  let built = false;
  try {
    log(`  creating ${tmp} with ${python} -m venv`);
    await runLogged(python, ["-m", "venv", tmp], { log });
    log(`  pip install -r ${requirementsFile}`);
    // --no-cache-dir: the venv is the cache; a pip cache would keep a second copy of the wheels.
    await runLogged(
      join(tmp, "bin", "python"),
      ["-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-r", requirementsFile],
      { log },
    );
    const marker = {
      requirements: requirementsFile,
      requirementLinesSha256: createHash("sha256")
        .update(await requirementLines(requirementsFile))
        .digest("hex"),
      python: await interpreterTag(python),
      seconds: Math.round((performance.now() - t0) / 1000),
    };
    await writeFile(join(tmp, COMPLETE_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
    try {
      await rename(tmp, dir);
      built = true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EEXIST" && code !== "ENOTEMPTY") throw err;
      if (!(await exists(join(dir, COMPLETE_MARKER)))) {
        // An interrupted build left a directory without a marker: replace it.
        await rm(dir, { recursive: true, force: true });
        await rename(tmp, dir);
        built = true;
      }
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  log(`  Python environment ready: ${dir} (${built ? `built in ${Math.round((performance.now() - t0) / 1000)} s` : "built concurrently by another process"})`);
  return built;
}
