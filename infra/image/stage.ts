/**
 * Stages what the image carries on top of its Debian base, and prints the content hash that keys
 * the image cache (infra/image/build.sh):
 *
 *   <out>/opt/shoal/dist/            the compiled services (build-services.ts), without source maps
 *   <out>/opt/shoal/node_modules/    the external packages and everything they need, copied from
 *                                    this clone's node_modules as package-lock.json resolves them
 *   <out>/usr/local/bin/node         the Node binary the project pins (the npm `node` package)
 *
 *   node --import tsx infra/image/stage.ts <out>     # prints the input hash
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, copyFile, cp, mkdir, readdir, readFile, rm, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { buildServices, EXTERNAL_PACKAGES, REPO_ROOT } from "./build-services.ts";

interface LockEntry {
  readonly version?: string;
  readonly dependencies?: Record<string, string>;
  readonly optionalDependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  readonly dev?: boolean;
  readonly link?: boolean;
}

/** Where Node would find `name` from the package at `from` (a lock key like `node_modules/a`). */
function resolveInLock(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base === "" ? `node_modules/${name}` : `${base}/node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (base === "") return undefined;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut < 0 ? "" : base.slice(0, cut);
  }
}

/**
 * The lock keys (`node_modules/...` paths) of the external packages and their runtime dependency
 * closure (optional ones where installed; peers where present), sorted.
 */
export async function prodModules(): Promise<Array<{ path: string; version: string }>> {
  const lock = JSON.parse(await readFile(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };
  const { packages } = lock;
  const seen = new Set<string>();
  const queue: string[] = [];
  for (const name of EXTERNAL_PACKAGES) {
    const key = resolveInLock(packages, "", name);
    if (!key) throw new Error(`package-lock.json has no ${name}: run npm ci`);
    queue.push(key);
  }
  while (queue.length > 0) {
    const key = queue.pop()!;
    if (seen.has(key)) continue;
    seen.add(key);
    const entry = packages[key]!;
    const wanted: Array<[string, boolean]> = [
      ...Object.keys(entry.dependencies ?? {}).map((n): [string, boolean] => [n, true]),
      ...Object.keys(entry.optionalDependencies ?? {}).map((n): [string, boolean] => [n, false]),
      ...Object.keys(entry.peerDependencies ?? {}).map((n): [string, boolean] => [n, !entry.peerDependenciesMeta?.[n]?.optional]),
    ];
    for (const [name, required] of wanted) {
      const dep = resolveInLock(packages, key, name);
      // The lock holds every platform's optional binary package (@node-rs/crc32-*); npm installs this platform's.
      if (dep && (required || existsSync(join(REPO_ROOT, dep)))) queue.push(dep);
      else if (!dep && required) throw new Error(`${key} needs ${name}, which package-lock.json does not hold`);
    }
  }
  return [...seen].sort().map((path) => ({ path, version: packages[path]!.version ?? "?" }));
}

/** Stages the image's own files under `out` and returns the hash of everything staged. */
export async function stage(out: string): Promise<string> {
  await rm(out, { recursive: true, force: true });
  const app = join(out, "opt/shoal");
  const dist = join(app, "dist");
  await buildServices(dist);
  for (const f of await readdir(dist)) if (f.endsWith(".map")) await rm(join(dist, f));
  for (const { path } of await prodModules()) {
    if (path.includes("node_modules/@types/") || path.endsWith("/undici-types")) continue; // type declarations only
    const from = join(REPO_ROOT, path);
    if (!(await stat(from).catch(() => undefined))) continue; // optional, not installed on this platform
    await cp(from, join(app, path), { recursive: true, dereference: true, filter: (src) => !src.includes("/node_modules/", from.length) || src === from });
  }
  await pruneOrtBinaries(join(app, "node_modules/onnxruntime-node/bin/napi-v6"));
  const nodeBin = join(REPO_ROOT, "node_modules/node/bin/node");
  await mkdir(join(out, "usr/local/bin"), { recursive: true });
  await copyFile(nodeBin, join(out, "usr/local/bin/node"));
  await chmod(join(out, "usr/local/bin/node"), 0o755);
  return hashTree(out);
}

/** onnxruntime-node ships binaries for every OS and CPU (~290 MB); the image needs linux/x64's. */
async function pruneOrtBinaries(binRoot: string): Promise<void> {
  for (const os of await readdir(binRoot)) {
    if (os !== "linux") {
      await rm(join(binRoot, os), { recursive: true });
      continue;
    }
    for (const arch of await readdir(join(binRoot, os))) if (arch !== "x64") await rm(join(binRoot, os, arch), { recursive: true });
  }
}

/** SHA-256 over every file's path, mode and bytes under `root`, in a fixed order. */
async function hashTree(root: string): Promise<string> {
  const hash = createHash("sha256");
  async function walk(dir: string): Promise<void> {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else {
        const s = await stat(p);
        hash.update(`${relative(root, p)}\0${(s.mode & 0o777).toString(8)}\0`);
        hash.update(await readFile(p));
      }
    }
  }
  await walk(root);
  return hash.digest("hex");
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: stage.ts <out dir>");
  process.stdout.write(`${await stage(out)}\n`);
}
