/**
 * A memory cgroup per worker host, for the `worker-memory-limit` fault (issue #49): each worker
 * of the lab starts inside its own cgroup with no limit, so the cgroup is charged for everything
 * the worker allocates (models, arenas, heap); the fault then sets the limit to what the worker
 * uses now plus a small margin, as a pod's limit would sit. cgroup v2 (`memory.max`) where its
 * hierarchy has the memory controller, else cgroup v1 (`memory.limit_in_bytes`): a process moved
 * into a v1 cgroup later leaves its charges behind (charge moving is deprecated and refused on
 * recent kernels), which is why the worker starts inside it.
 */
import { mkdir, readdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** One worker's memory cgroup. */
export interface WorkerCgroup {
  readonly path: string;
  /** The file a process writes its pid to, to enter (children inherit it). */
  readonly procsFile: string;
  /** Bytes charged now (page cache included) and the anonymous part of it (what cannot be reclaimed without swap). */
  usage(): Promise<{ totalBytes: number; anonBytes: number }>;
  /**
   * Limits the cgroup to `bytes` (and no swap, where the hierarchy has a swap limit): the kernel
   * reclaims the page cache first, then OOM-kills a process of the cgroup.
   */
  limit(bytes: number): Promise<void>;
  /** Removes the limit. */
  unlimit(): Promise<void>;
  /** OOM kills in this cgroup so far, and how often its usage hit the limit. */
  pressure(): Promise<{ oomKills: number; limitHits: number }>;
}

/** The memory cgroups of one campaign: a parent folder with one cgroup per host label. */
export interface MemoryCgroups {
  readonly version: 1 | 2;
  /** The cgroup of `label` (created on first use). */
  forHost(label: string): Promise<WorkerCgroup>;
  /** Removes every cgroup made (after their processes are gone); never throws. */
  remove(): Promise<void>;
}

interface Hierarchy {
  readonly version: 1 | 2;
  readonly root: string;
}

/** The mounted memory hierarchy: v2 if its root offers the memory controller, else v1's. */
async function findHierarchy(): Promise<Hierarchy | string> {
  const mounts = await readFile("/proc/mounts", "utf8").catch(() => "");
  const lines = mounts.split("\n").map((l) => l.split(" "));
  for (const [, dir, type] of lines) {
    if (type !== "cgroup2" || dir === undefined) continue;
    const controllers = await readFile(join(dir, "cgroup.controllers"), "utf8").catch(() => "");
    if (controllers.split(/\s+/).includes("memory")) return { version: 2, root: dir };
  }
  const v1 = lines.find(([, , type, opts]) => type === "cgroup" && (opts ?? "").split(",").includes("memory"));
  if (v1?.[1] !== undefined) return { version: 1, root: v1[1] };
  return "no memory cgroup controller is mounted (neither cgroup v2 with 'memory' in cgroup.controllers nor a cgroup v1 memory hierarchy; see mount | grep cgroup)";
}

const readNumber = async (file: string): Promise<number> => Number((await readFile(file, "utf8")).trim());

/** `key value` lines (memory.stat, memory.events, memory.oom_control) as numbers. */
async function readKeyed(file: string): Promise<Map<string, number>> {
  const text = await readFile(file, "utf8").catch(() => "");
  return new Map(
    text
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((kv) => kv.length === 2)
      .map(([k, v]) => [k!, Number(v)]),
  );
}

function workerCgroup(version: 1 | 2, path: string): WorkerCgroup {
  const f = (name: string): string => join(path, name);
  return {
    path,
    procsFile: f("cgroup.procs"),
    async usage() {
      const stat = await readKeyed(f("memory.stat"));
      if (version === 2) return { totalBytes: await readNumber(f("memory.current")), anonBytes: stat.get("anon") ?? 0 };
      return { totalBytes: await readNumber(f("memory.usage_in_bytes")), anonBytes: stat.get("total_rss") ?? stat.get("rss") ?? 0 };
    },
    async limit(bytes) {
      if (version === 2) {
        await writeFile(f("memory.swap.max"), "0").catch(() => undefined); // absent without swap accounting
        await writeFile(f("memory.max"), String(bytes));
      } else {
        // v1 refuses (EBUSY) a limit under the usage it cannot reclaim; memsw is left alone (no swap here or it follows).
        await writeFile(f("memory.limit_in_bytes"), String(bytes));
      }
    },
    async unlimit() {
      await writeFile(f(version === 2 ? "memory.max" : "memory.limit_in_bytes"), version === 2 ? "max" : "-1");
    },
    async pressure() {
      if (version === 2) {
        const events = await readKeyed(f("memory.events"));
        return { oomKills: events.get("oom_kill") ?? 0, limitHits: events.get("max") ?? 0 };
      }
      const oom = await readKeyed(f("memory.oom_control"));
      return { oomKills: oom.get("oom_kill") ?? 0, limitHits: await readNumber(f("memory.failcnt")).catch(() => 0) };
    },
  };
}

/**
 * Creates the campaign's parent cgroup, or says why it cannot (run it before anything starts:
 * the `worker-memory-limit` kind needs it).
 * @param name the parent folder's name (one per run, e.g. `shoal-chaos-<pid>`)
 */
export async function createMemoryCgroups(name: string): Promise<MemoryCgroups | string> {
  const h = await findHierarchy();
  if (typeof h === "string") return h;
  const parent = join(h.root, name);
  try {
    await mkdir(parent, { recursive: true });
    if (h.version === 2) {
      // Children get memory.max only where each ancestor hands the controller down.
      await writeFile(join(h.root, "cgroup.subtree_control"), "+memory").catch(() => undefined);
      await writeFile(join(parent, "cgroup.subtree_control"), "+memory");
    }
  } catch (err) {
    await rmdir(parent).catch(() => undefined);
    return `cannot create a memory cgroup under ${h.root} (cgroup v${h.version}): ${err instanceof Error ? err.message : String(err)}`;
  }
  const made = new Map<string, WorkerCgroup>();
  return {
    version: h.version,
    async forHost(label) {
      const known = made.get(label);
      if (known) return known;
      const path = join(parent, label);
      await mkdir(path, { recursive: true });
      const cg = workerCgroup(h.version, path);
      await readFile(join(path, h.version === 2 ? "memory.max" : "memory.limit_in_bytes"), "utf8").catch(() => {
        throw new Error(`${path} has no memory limit file: the memory controller is not enabled for it`);
      });
      made.set(label, cg);
      return cg;
    },
    async remove() {
      const children = await readdir(parent, { withFileTypes: true }).catch(() => []);
      for (const c of children) if (c.isDirectory()) await rmdir(join(parent, c.name)).catch(() => undefined);
      await rmdir(parent).catch(() => undefined);
    },
  };
}

/**
 * Why the `worker-memory-limit` kind cannot run on this machine, or undefined when it can (a
 * probe cgroup is created and removed).
 */
export async function memoryCgroupProblem(): Promise<string | undefined> {
  const probe = await createMemoryCgroups(`shoal-chaos-probe-${process.pid}`);
  if (typeof probe === "string") return probe;
  try {
    await probe.forHost("probe");
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await probe.remove();
  }
}
