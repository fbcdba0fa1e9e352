/**
 * A cross-process lock for slow cache builds on one machine (the pretrained model's Python
 * environment downloads 2.8 GB): the second builder waits instead of downloading it again. The
 * lock is a directory (mkdir is atomic) holding the owner's pid; a lock whose owner is gone is
 * taken over. Builds stay correct without it (temporary sibling + rename); it only saves work.
 */
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const POLL_MS = 2_000;
/** A lock directory without a pid file this old was left by a crash between mkdir and write. */
const ORPHAN_MS = 60_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Whether the lock at `path` has no living owner. */
async function stale(path: string): Promise<boolean> {
  const pid = Number.parseInt(await readFile(join(path, "pid"), "utf8").catch(() => ""), 10);
  if (Number.isSafeInteger(pid) && pid > 0) return !alive(pid);
  const info = await stat(path).catch(() => undefined);
  return info !== undefined && Date.now() - info.mtimeMs > ORPHAN_MS;
}

/**
 * Runs `fn` while holding the lock `path` (a directory that must not exist otherwise), waiting
 * for another holder on this machine first.
 * @param onWait called once if the lock is busy, with the holder's description
 */
export async function withBuildLock<T>(path: string, fn: () => Promise<T>, onWait?: (holder: string) => void): Promise<T> {
  let waited = false;
  for (;;) {
    try {
      await mkdir(path);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    if (await stale(path)) {
      await rm(path, { recursive: true, force: true });
      continue;
    }
    if (!waited) {
      waited = true;
      const pid = await readFile(join(path, "pid"), "utf8").catch(() => "?");
      onWait?.(`process ${pid.trim()} (${path})`);
    }
    await sleep(POLL_MS);
  }
  try {
    await writeFile(join(path, "pid"), `${process.pid}\n`);
    return await fn();
  } finally {
    await rm(path, { recursive: true, force: true });
  }
}

/** Builds in progress in this process, by directory: concurrent callers share one. */
const building = new Map<string, Promise<boolean>>();

export interface BuildOnceOptions {
  /** Whether `dir` already holds a complete, current build. */
  readonly isBuilt: () => Promise<boolean>;
  /** Builds `dir` (under the lock); resolves false if it found it built after all. */
  readonly build: () => Promise<boolean>;
  /** Told once if another process holds the lock. */
  readonly onWait?: (holder: string) => void;
}

/**
 * Makes sure `dir` is built, at most once at a time: concurrent callers in this process share one
 * build, other processes wait on the `<dir>.lock` lock, and a build found complete (before or
 * under the lock) is not redone. Resolves whether this call built it (false for the callers that
 * shared someone else's build or found it there).
 */
export function buildOnce(dir: string, opts: BuildOnceOptions): Promise<boolean> {
  const pending = building.get(dir);
  if (pending) return pending.then(() => false);
  const p = (async () => {
    if (await opts.isBuilt()) return false;
    await mkdir(join(dir, ".."), { recursive: true });
    // Whoever held the lock may have just built it.
    return withBuildLock(`${dir}.lock`, async () => ((await opts.isBuilt()) ? false : opts.build()), opts.onWait);
  })().finally(() => building.delete(dir));
  building.set(dir, p);
  return p;
}
