/**
 * The Python environment cache and its build lock, on a venv with no packages (no network).
 * The real environment (torch, sentence-transformers) is exercised by infra/pretrained.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { withBuildLock } from "./build-lock.ts";
import { ensurePythonEnv, pythonEnvDir, requirementLines } from "./python-env.ts";

let work: string;
before(async () => {
  work = await mkdtemp(join(tmpdir(), "shoal-pyenv-test-"));
});
after(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe("python environments", () => {
  it("are keyed by requirement lines, not comments", async () => {
    const a = join(work, "a.txt");
    const b = join(work, "b.txt");
    await writeFile(a, "# pinned\nfoo==1.0  # why\n\nbar==2.0\n");
    await writeFile(b, "foo==1.0\nbar==2.0");
    assert.equal(await requirementLines(a), "foo==1.0\nbar==2.0");
    const root = join(work, "root");
    assert.equal(await pythonEnvDir("x", a, { root }), await pythonEnvDir("x", b, { root }));
    await writeFile(b, "foo==1.1\nbar==2.0");
    assert.notEqual(await pythonEnvDir("x", a, { root }), await pythonEnvDir("x", b, { root }));
    assert.match(await pythonEnvDir("x", a, { root }), /[/\\]pyenv-x-[0-9a-f]{12}$/);
  });

  it("build once (concurrent callers share it), run from their final path, then come from the cache", async () => {
    const requirements = join(work, "empty.txt");
    await writeFile(requirements, "# no packages: only the venv machinery is under test\n");
    const root = join(work, "cache");
    const results: boolean[] = [];
    const [e1, e2] = await Promise.all([
      ensurePythonEnv("t", requirements, { root, onResult: (b) => results.push(b) }),
      ensurePythonEnv("t", requirements, { root, onResult: (b) => results.push(b) }),
    ]);
    assert.deepEqual(results.sort(), [false, true]);
    assert.equal(e1.dir, e2.dir);
    // Renamed after pip ran: sys.prefix must still be the final directory.
    const { stdout } = await promisify(execFile)(e1.python, ["-c", "import sys; print(sys.prefix)"]);
    assert.equal(stdout.trim(), e1.dir);
    assert.deepEqual((await readdir(root)).sort(), [e1.dir.slice(root.length + 1)], "no temporary or lock folders left");
    let cached: boolean | undefined;
    await ensurePythonEnv("t", requirements, {
      root,
      onResult: (b) => {
        cached = !b;
      },
    });
    assert.equal(cached, true);
  });

  it("fail with the interpreter named when it is missing", async () => {
    await assert.rejects(ensurePythonEnv("t", join(work, "empty.txt"), { root: work, python: "/nonexistent/python3" }), /SHOAL_PYTHON/);
  });
});

describe("build lock", () => {
  it("serialises holders and reports the wait once", async () => {
    const lock = join(work, "serial.lock");
    const events: string[] = [];
    const waits: string[] = [];
    await Promise.all([
      withBuildLock(lock, async () => {
        events.push("a+");
        await sleep(300);
        events.push("a-");
      }),
      sleep(50).then(() =>
        withBuildLock(
          lock,
          async () => {
            events.push("b+");
            events.push("b-");
          },
          (h) => waits.push(h),
        ),
      ),
    ]);
    assert.deepEqual(events, ["a+", "a-", "b+", "b-"]);
    assert.equal(waits.length, 1);
    assert.match(waits[0]!, new RegExp(`process ${process.pid} `));
  });

  it("takes over a lock whose owner is gone", async () => {
    const lock = join(work, "stale.lock");
    await mkdir(lock);
    await writeFile(join(lock, "pid"), "2147483646\n"); // no such process
    const t0 = performance.now();
    assert.equal(await withBuildLock(lock, async () => 42), 42);
    assert.ok(performance.now() - t0 < 1000);
  });
});
