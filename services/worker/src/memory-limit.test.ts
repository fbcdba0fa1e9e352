import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { memoryLimitBytes } from "./memory-limit.ts";

const GiB = 1024 ** 3;
const files =
  (entries: Record<string, string>) =>
  (path: string): string => {
    const text = entries[path];
    if (text === undefined) throw new Error(`ENOENT ${path}`);
    return text;
  };

describe("memoryLimitBytes", () => {
  test("a cgroup v2 limit below the host's memory wins (the process's own cgroup first)", () => {
    const read = files({
      "/proc/self/cgroup": "0::/kubepods/pod1/c1\n",
      "/sys/fs/cgroup/kubepods/pod1/c1/memory.max": `${4 * GiB}\n`,
      "/sys/fs/cgroup/memory.max": "max\n",
    });
    assert.equal(memoryLimitBytes(read, 256 * GiB), 4 * GiB);
  });
  test("'max' and v1's huge 'unlimited' value mean the host's memory", () => {
    assert.equal(memoryLimitBytes(files({ "/sys/fs/cgroup/memory.max": "max" }), 24 * GiB), 24 * GiB);
    assert.equal(memoryLimitBytes(files({ "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712" }), 24 * GiB), 24 * GiB);
  });
  test("cgroup v1 limits apply; no cgroup files at all: the host's memory", () => {
    assert.equal(memoryLimitBytes(files({ "/sys/fs/cgroup/memory/memory.limit_in_bytes": String(2 * GiB) }), 24 * GiB), 2 * GiB);
    assert.equal(memoryLimitBytes(files({}), 24 * GiB), 24 * GiB);
  });
  test("on this machine: a positive size no larger than the host's memory", () => {
    const n = memoryLimitBytes();
    assert.ok(n > 0 && Number.isSafeInteger(n));
  });
});
