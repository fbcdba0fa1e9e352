/**
 * A build-once cache of generated model directories:
 *   ${SHOAL_CACHE:-$HOME/.cache/shoal}/models/<preset>-g<generatorVersion>/
 * A directory is built in a temporary sibling, gets a `.complete` marker, and is then renamed
 * into place, so readers never see a half-written model and concurrent builders are safe.
 */
import { randomBytes } from "node:crypto";
import { access, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import type { PresetName } from "./presets.ts";
import { GENERATOR_VERSION, getPreset } from "./presets.ts";
import type { WriteOptions } from "./write-model-dir.ts";
import { writeModelDir } from "./write-model-dir.ts";

export const COMPLETE_MARKER = ".complete";

/** `${SHOAL_CACHE:-$HOME/.cache/shoal}`: models, Python environments and other build products. */
export function shoalCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.SHOAL_CACHE && env.SHOAL_CACHE !== "" ? env.SHOAL_CACHE : join(homedir(), ".cache", "shoal");
}

export function modelCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return join(shoalCacheRoot(env), "models");
}

export function cachedModelDir(preset: PresetName | string, root: string = modelCacheRoot()): string {
  return join(root, `${getPreset(preset).name}-g${GENERATOR_VERSION}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

export function isCompleteModelDir(dir: string): Promise<boolean> {
  return exists(join(dir, COMPLETE_MARKER));
}

export interface EnsureOptions extends WriteOptions {
  /** Cache root (default: modelCacheRoot()). */
  root?: string;
  /** Called with true when the directory was built by this call, false when it was cached. */
  onResult?: (built: boolean) => void;
}

const inFlight = new Map<string, Promise<string>>();

/** Returns the cached model directory for a preset, generating it first if it is missing. */
export function ensureModel(preset: PresetName | string, options: EnsureOptions = {}): Promise<string> {
  const dir = cachedModelDir(preset, options.root ?? modelCacheRoot());
  const pending = inFlight.get(dir);
  if (pending)
    return pending.then((d) => {
      options.onResult?.(false);
      return d;
    });
  const p = ensureUncoordinated(preset, dir, options).finally(() => inFlight.delete(dir));
  inFlight.set(dir, p);
  return p;
}

async function ensureUncoordinated(preset: string, dir: string, options: EnsureOptions): Promise<string> {
  if (await isCompleteModelDir(dir)) {
    options.onResult?.(false);
    return dir;
  }
  const root = join(dir, "..");
  await mkdir(root, { recursive: true });
  let built = false;
  const tmp = join(root, `.tmp-${getPreset(preset).name}-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    const result = await writeModelDir(getPreset(preset), tmp, options);
    const marker = {
      generatorVersion: GENERATOR_VERSION,
      source: result.manifest.source,
      files: Object.fromEntries(result.files.map((f) => [f.name, { bytes: f.bytes, sha256: f.sha256 }])),
    };
    await writeFile(join(tmp, COMPLETE_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
    built = await moveIntoPlace(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  if (!(await isCompleteModelDir(dir))) throw new Error(`model directory ${dir} is incomplete after build`);
  options.onResult?.(built);
  return dir;
}

/** Renames tmp to dir; false when another builder's complete copy was already there. */
async function moveIntoPlace(tmp: string, dir: string): Promise<boolean> {
  try {
    await rename(tmp, dir);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EEXIST" && code !== "ENOTEMPTY") throw err;
  }
  // Someone else got there first. If theirs is complete, keep it (ours is identical).
  if (await isCompleteModelDir(dir)) return false;
  // A stale, incomplete directory (not written by this module): move it aside and retry once.
  const stale = `${dir}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  await rename(dir, stale);
  await rm(stale, { recursive: true, force: true });
  await rename(tmp, dir);
  return true;
}
