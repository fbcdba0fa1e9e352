import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");

/** One JSON log line of a Shoal service. */
/**
 * Node flags every service runs with. kafkajs 2.2.4's request queue arms
 * `setTimeout(fn, throttledUntil - Date.now())` with `throttledUntil = -1` whenever its queue
 * empties; Node 24 warns on the negative delay (the timer still fires at 1 ms, as intended).
 */
export const SERVICE_NODE_FLAGS = ["--disable-warning=TimeoutNegativeWarning"];

/**
 * The node arguments that run a service: `<dir>/<kind>.js` for a compiled folder (`builtDir`, else
 * SHOAL_TEST_SERVICES_DIR, which `npm test` sets to the bundles it builds once per run), else
 * `services/<kind>/src/main.ts` under tsx. The bundles are what the image ships, and a service
 * starts from one on about 1 s of CPU against 2.3 s under tsx, which the e2e suite pays a few
 * hundred times.
 */
export function serviceEntry(kind: "gateway" | "worker", builtDir = process.env["SHOAL_TEST_SERVICES_DIR"]): string[] {
  return builtDir !== undefined && builtDir !== ""
    ? [resolve(builtDir, `${kind}.js`)]
    : ["--import", "tsx", resolve(REPO_ROOT, `services/${kind}/src/main.ts`)];
}

export type LogLine = Record<string, unknown> & { msg?: string; level?: string };

/** A gateway or worker running as its own OS process, with its parsed log lines. */
export class ServiceProcess {
  readonly logs: LogLine[] = [];
  readonly exited: Promise<number | null>;
  private waiters: Array<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
  ) {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (raw) => this.onLine(raw));
    const errs = createInterface({ input: child.stderr! });
    errs.on("line", (raw) => this.onLine(JSON.stringify({ level: "stderr", msg: raw })));
    this.exited = once(child, "exit").then(([code]) => code as number | null);
  }

  /**
   * Starts a gateway or a worker with the given environment: the compiled `<builtDir>/<kind>.js`
   * (`npm run build:services`) when `builtDir` is given, else `serviceEntry`'s choice.
   */
  static start(kind: "gateway" | "worker", name: string, env: Record<string, string>, builtDir?: string): ServiceProcess {
    // SHOAL_NODE_ARGS: extra node flags for profiling (e.g. --cpu-prof), which NODE_OPTIONS refuses.
    const extra = (env["SHOAL_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "");
    // Gateways start without the embedding cache unless a test asks for it (e2e/embed-cache.test.ts):
    // the other tests send the same texts again to compare vectors and count jobs, which the cache
    // would answer without the queue, batching and workers they are there to test.
    const defaults: Record<string, string> = kind === "gateway" ? { SHOAL_EMBED_CACHE_BYTES: "0" } : {};
    return ServiceProcess.spawn(name, process.execPath, [...extra, ...SERVICE_NODE_FLAGS, ...serviceEntry(kind, builtDir)], {
      LOG_LEVEL: "info",
      ...defaults,
      ...env,
    });
  }

  /** Runs any command whose output is a Shoal service's log (a container runtime, for one). */
  static spawn(name: string, command: string, args: readonly string[], env: Record<string, string>): ServiceProcess {
    const child = spawn(command, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    return new ServiceProcess(name, child);
  }

  /** Whether the process is still running (it has neither exited nor been killed). */
  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  private onLine(raw: string): void {
    let line: LogLine;
    try {
      line = JSON.parse(raw) as LogLine;
    } catch {
      line = { level: "stdout", msg: raw };
    }
    this.logs.push(line);
    if (process.env["SHOAL_E2E_ECHO"]) process.stderr.write(`[${this.name}] ${raw}\n`);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(line)) return true;
      w.resolve(line);
      return false;
    });
  }

  /** Resolves with the first log line (past or future) matching `pred`; rejects on exit or timeout. */
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs = 60_000): Promise<LogLine> {
    const seen = this.logs.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise<LogLine>((resolveLine, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no matching log line within ${timeoutMs} ms\n${this.tail()}`)), timeoutMs);
      void this.exited.then((code) => reject(new Error(`${this.name} exited (${code}) before the expected log line\n${this.tail()}`)));
      this.waiters.push({
        pred,
        resolve: (l) => {
          clearTimeout(timer);
          resolveLine(l);
        },
      });
    });
  }

  tail(n = 30): string {
    return this.logs
      .slice(-n)
      .map((l) => JSON.stringify(l))
      .join("\n");
  }

  /** The last `n` warn, error, fatal and stderr lines, one JSON line each, for a test to print when it fails. */
  warnings(n = 40): string {
    const lines = this.logs.filter((l) => ["warn", "error", "fatal", "stderr"].includes(String(l.level)));
    return [`--- ${this.name}: last ${Math.min(n, lines.length)} of ${lines.length} warn/error lines`, ...lines.slice(-n).map((l) => JSON.stringify(l))].join(
      "\n",
    );
  }

  /** Sends a signal without waiting for an exit (SIGSTOP / SIGCONT to hang and resume a process). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Sends a signal and waits for the exit code (bounded). */
  async stop(signal: NodeJS.Signals = "SIGTERM", timeoutMs = 30_000): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill("SIGKILL"), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Writes each service's log lines to `dir/<name>.log` (JSON lines), for a look after a run. */
export async function saveLogs(dir: string, services: ReadonlyArray<{ readonly name: string; readonly logs: readonly LogLine[] }>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const s of services) await writeFile(join(dir, `${s.name}.log`), s.logs.map((l) => JSON.stringify(l)).join("\n"));
}
