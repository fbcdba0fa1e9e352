/**
 * How long each test file took in the last runs on this machine, kept in the Shoal cache
 * (`${SHOAL_CACHE:-~/.cache/shoal}/test-file-times.json`, outside the clone). `npm test` balances
 * its e2e lanes with them (`lanes.ts`), so lanes running side by side end close together. Two lanes
 * that end together may each write the record from what they read before: the later write wins
 * and the other lane's times wait for the next run, which is all the record is for.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** Test file (relative to the repository root) → milliseconds of its top-level tests. */
export type FileTimes = ReadonlyMap<string, number>;

/**
 * The cache root as `shoalCacheRoot` (@shoal/models) has it, spelled out here: the test runner loads
 * its reporters before tsx, with Node's own type stripping, which cannot load that package.
 */
export function fileTimesPath(env: NodeJS.ProcessEnv = process.env): string {
  const root = env["SHOAL_CACHE"] !== undefined && env["SHOAL_CACHE"] !== "" ? env["SHOAL_CACHE"] : join(homedir(), ".cache", "shoal");
  return join(root, "test-file-times.json");
}

/** The recorded times; an empty map when there are none or the file is unreadable. */
export async function readFileTimes(path = fileTimesPath()): Promise<FileTimes> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, "utf8"));
  } catch {
    return new Map();
  }
  if (typeof parsed !== "object" || parsed === null) return new Map();
  return new Map(Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === "number" && Number.isFinite(e[1]) && e[1] >= 0));
}

/** Records `times` over the earlier ones (files not in `times` keep theirs); written whole, then renamed. */
export async function recordFileTimes(times: FileTimes, path = fileTimesPath()): Promise<void> {
  const merged = new Map([...(await readFileTimes(path)), ...times]);
  const sorted = Object.fromEntries([...merged].sort((a, b) => a[0].localeCompare(b[0])).map(([f, ms]) => [f, Math.round(ms)]));
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(sorted, null, 1)}\n`);
  await rename(tmp, path);
}
