/**
 * Processes inside a lab host's namespace, found by `ip netns pids`: the broker's JVM (to kill,
 * hang or stop it, and restart it with kafka.sh on its own data), and every process at teardown
 * (so nothing the campaign started outlives it, whoever launched it: a worker restarted mid-run, a
 * broker that kafka.sh detached with setsid).
 */
import { execFile, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { KAFKA_SH, REPO_ROOT } from "../../infra/dev/shell.ts";
import type { Host } from "../harness/netns.ts";

const exec = promisify(execFile);

/** The pids running in `host`'s namespace (none when it is gone). */
export async function pidsIn(host: Host): Promise<number[]> {
  const out = await exec("ip", ["netns", "pids", host.ns], { timeout: 10_000 }).then(
    (r) => r.stdout,
    () => "",
  );
  return out
    .split(/\s+/)
    .filter((p) => /^\d+$/.test(p))
    .map(Number);
}

/** Whether a pid is alive and not a zombie. */
export async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  return stat !== "" && !/^\d+ \(.*\) Z/.test(stat);
}

/** The pid of the Kafka JVM in `host`'s namespace, or undefined. */
export async function brokerPid(host: Host): Promise<number | undefined> {
  for (const pid of await pidsIn(host)) {
    const cmd = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmd.includes("kafka.Kafka") && (await alive(pid))) return pid;
  }
  return undefined;
}

/** The environment a process was started with (kafka.sh's KAFKA_* settings, for a restart). */
export async function environOf(pid: number): Promise<NodeJS.ProcessEnv> {
  const raw = await readFile(`/proc/${pid}/environ`, "utf8");
  const env: NodeJS.ProcessEnv = {};
  for (const kv of raw.split("\0")) {
    const i = kv.indexOf("=");
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return env;
}

/** Waits until `pid` is gone (or a zombie), up to `timeoutMs`; SIGKILLs it then. */
export async function awaitExit(pid: number, timeoutMs: number): Promise<boolean> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    if (!(await alive(pid))) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Gone in the meantime.
  }
  return false;
}

/**
 * Starts the broker on `host` again on its own data (`kafka.sh start` with the environment it
 * first ran with), and resolves when it serves.
 * @throws Error with kafka.sh's output when it does not come back
 */
export function restartBroker(host: Host, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("ip", host.argv("bash", [KAFKA_SH, "start"]), { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`kafka.sh start on ${host.label} exited with ${code}:\n${output.slice(-2_000)}`)),
    );
  });
}

/** SIGKILLs every process in each host's namespace (stopped ones included); never throws. */
export async function killEverythingIn(hosts: readonly Host[]): Promise<number> {
  let n = 0;
  for (const h of hosts) {
    for (const pid of await pidsIn(h)) {
      try {
        process.kill(pid, "SIGKILL");
        n++;
      } catch {
        // Already gone.
      }
    }
  }
  return n;
}
