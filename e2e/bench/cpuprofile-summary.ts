/**
 * Summarises V8 `.cpuprofile` files (node --cpu-prof): self time by package (a node_modules
 * package, a Shoal service, Node's internals, GC, idle) and the hottest functions.
 *   node --import tsx e2e/bench/cpuprofile-summary.ts FILE.cpuprofile [...]
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly hitCount?: number;
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/** Where a function lives: `kafkajs`, `services/gateway`, `node:internal`, `(garbage collector)`... */
export function packageOf(url: string, fn: string): string {
  if (url === "") return fn.startsWith("(") ? fn : "(native)";
  const nm = url.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const svc = /\/(services|gen|infra|e2e)\/([^/]+)\//.exec(url);
  if (svc) return `${svc[1]}/${svc[2]}`;
  if (url.startsWith("node:")) return "node:internal";
  return url;
}

export interface ProfileSummary {
  readonly totalMs: number;
  readonly byPackage: readonly { name: string; ms: number }[];
  readonly topFunctions: readonly { name: string; ms: number }[];
}

/** Self time per package and per function (ms), from the samples' time deltas. */
export function summarize(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    // A sample's delta is the time since the previous one: charge it to this sample's node.
    selfMs.set(samples[i]!, (selfMs.get(samples[i]!) ?? 0) + (deltas[i] ?? 0) / 1000);
  }
  const pkg = new Map<string, number>();
  const fns = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of selfMs) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const p = packageOf(url, functionName);
    pkg.set(p, (pkg.get(p) ?? 0) + ms);
    const name = `${functionName || "(anonymous)"} ${url ? `${url.replace(/^.*\/(node_modules|services|gen)\//, "$1/")}:${lineNumber + 1}` : ""}`.trim();
    fns.set(name, (fns.get(name) ?? 0) + ms);
    total += ms;
  }
  const sorted = (m: Map<string, number>) => [...m.entries()].map(([name, ms]) => ({ name, ms })).sort((a, b) => b.ms - a.ms);
  return { totalMs: total, byPackage: sorted(pkg), topFunctions: sorted(fns) };
}

/** Markdown lines for one profile: busy time (idle excluded) by package, then the top functions. */
export function formatSummary(label: string, s: ProfileSummary, top = 12): string {
  const idle = s.byPackage.find((p) => p.name === "(idle)")?.ms ?? 0;
  const busy = s.totalMs - idle;
  const pct = (ms: number) => `${((100 * ms) / busy).toFixed(1)}%`;
  const lines = [
    `${label}: ${(busy / 1000).toFixed(2)} s busy of ${(s.totalMs / 1000).toFixed(2)} s profiled`,
    "",
    "| package | share of busy time |",
    "| --- | --- |",
  ];
  for (const p of s.byPackage.filter((p) => p.name !== "(idle)").slice(0, top)) lines.push(`| ${p.name} | ${pct(p.ms)} |`);
  lines.push("", "| function (self time) | share |", "| --- | --- |");
  for (const f of s.topFunctions.filter((f) => !f.name.startsWith("(idle)")).slice(0, top)) lines.push(`| \`${f.name}\` | ${pct(f.ms)} |`);
  return lines.join("\n");
}

/** A service's environment to run under --cpu-prof into `dir`/`name` (a bench's BENCH_PROFILE), or nothing without a dir. */
export function profileEnv(dir: string | undefined, name: string): Record<string, string> {
  return dir === undefined ? {} : { SHOAL_NODE_ARGS: `--cpu-prof --cpu-prof-dir=${join(dir, name)}` };
}

/** The summaries of every profile under `dir`/<name> for each name (a bench's `BENCH_PROFILE` folders), in order. */
export async function summarizeProfileDirs(dir: string, names: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const name of names) {
    for (const file of (await readdir(join(dir, name)).catch(() => [] as string[])).filter((f) => f.endsWith(".cpuprofile"))) {
      const profile = JSON.parse(await readFile(join(dir, name, file), "utf8")) as CpuProfile;
      out.push(formatSummary(`${name} (${file})`, summarize(profile)));
    }
  }
  return out;
}

if (import.meta.main) {
  for (const file of process.argv.slice(2)) {
    const profile = JSON.parse(await readFile(file, "utf8")) as CpuProfile;
    console.log(`${formatSummary(file, summarize(profile))}\n`);
  }
}
