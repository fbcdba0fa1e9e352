/**
 * Process and thread CPU time from /proc (Linux), for benchmarks that charge CPU to components.
 */
import { readdir, readFile, readlink } from "node:fs/promises";

const TICKS_PER_SECOND = 100;

/** user + system CPU of a process (all threads) or of one thread, in ms. */
async function statCpuMs(path: string): Promise<number> {
  const text = await readFile(path, "utf8");
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / TICKS_PER_SECOND;
}

/** CPU ms of the whole process `pid`. */
export function processCpuMs(pid: number): Promise<number> {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** CPU ms of the process's main thread (the JS event loop of a Node process). */
export function mainThreadCpuMs(pid: number): Promise<number> {
  return statCpuMs(`/proc/${pid}/task/${pid}/stat`);
}

/** The pid listening on 127.0.0.1:`port` (TCP), found through /proc/net/tcp socket inodes. */
export async function pidListeningOn(port: number): Promise<number | undefined> {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const lines = (await readFile(file, "utf8").catch(() => "")).split("\n").slice(1);
    for (const line of lines) {
      const cols = line.trim().split(/\s+/);
      // local_address is cols[1] (ADDR:PORT), state cols[3] (0A = LISTEN), inode cols[9].
      if (cols[1]?.endsWith(`:${hex}`) && cols[3] === "0A" && cols[9]) inodes.add(`socket:[${cols[9]}]`);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fds = await readdir(`/proc/${entry}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const target = await readlink(`/proc/${entry}/fd/${fd}`).catch(() => "");
      if (inodes.has(target)) return Number(entry);
    }
  }
  return undefined;
}

/** A JVM's CPU split by thread kind, in ms: its JIT compiler threads, its garbage collector's, and all the rest. */
export interface JvmCpuMs {
  readonly total: number;
  readonly compiler: number;
  readonly gc: number;
}

/**
 * CPU ms of JVM `pid`, split by thread name (/proc/<pid>/task/<tid>/comm, cut to 15 characters by
 * Linux): HotSpot's "C1 CompilerThread<n>" / "C2 CompilerThread<n>" and "GC Thread#<n>" (also G1's
 * "G1 Conc#<n>", "G1 Refine#<n>", "G1 Service"). Threads that ended are in the process total only.
 */
export async function jvmCpuMs(pid: number): Promise<JvmCpuMs> {
  const total = await processCpuMs(pid);
  let compiler = 0;
  let gc = 0;
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const comm = (await readFile(`/proc/${pid}/task/${tid}/comm`, "utf8").catch(() => "")).trim();
    const isCompiler = /^C[12] CompilerThre/.test(comm);
    const isGc = /^(GC Thread#|G1 )/.test(comm);
    if (!isCompiler && !isGc) continue;
    const ms = await statCpuMs(`/proc/${pid}/task/${tid}/stat`).catch(() => 0);
    if (isCompiler) compiler += ms;
    else gc += ms;
  }
  return { total, compiler, gc };
}
