/**
 * The memory this process may use: the cgroup's limit when it is below the host's memory (a
 * container, a Kubernetes pod, a systemd slice), else the host's. The default model budget is half
 * of it — sized from host memory, a worker in a 4 GiB pod on a 256 GiB node would be OOM-killed.
 */
import { readFileSync } from "node:fs";
import { totalmem } from "node:os";

type Reader = (path: string) => string;

const readText: Reader = (path) => readFileSync(path, "utf8");

/** cgroup v2 (this process's own cgroup, then the mount's root) and v1 limit files, in order. */
function limitFiles(read: Reader): string[] {
  const files: string[] = [];
  try {
    const own = /^0::(\/.*)$/m.exec(read("/proc/self/cgroup"))?.[1];
    if (own !== undefined && own !== "/") files.push(`/sys/fs/cgroup${own}/memory.max`);
  } catch {
    // no /proc/self/cgroup: not Linux, or no cgroup v2
  }
  files.push("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes");
  return files;
}

/** The smallest of the host's memory and any cgroup memory limit that applies, in bytes. */
export function memoryLimitBytes(read: Reader = readText, hostBytes: number = totalmem()): number {
  let limit = hostBytes;
  for (const file of limitFiles(read)) {
    let text: string;
    try {
      text = read(file).trim();
    } catch {
      continue;
    }
    const n = Number(text);
    // "max" (v2) or a huge number (v1) means no limit.
    if (text !== "max" && Number.isSafeInteger(n) && n > 0 && n < limit) limit = n;
  }
  return limit;
}
