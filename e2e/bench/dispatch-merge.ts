/**
 * Joins `npm run bench:dispatch -- --json` results of the same configuration run in several
 * invocations (more arms, a tuning sweep added later) into one report, JSON and chart.
 *
 *   node --import tsx e2e/bench/dispatch-merge.ts a.json b.json --json all.json --chart all.svg
 *
 * With one file it prints that run's report again (with the report code of today).
 *
 * Refuses results whose trace, workers, runtime, models or SLOs differ: only arms offered the
 * same work are comparable.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { dispatchChartSvg } from "./dispatch-chart.ts";
import { readInfinity, reportLines, writeInfinity, type DispatchResults } from "./dispatch-report.ts";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: "string" }, chart: { type: "string" } } });
if (positionals.length < 1) {
  console.error("usage: dispatch-merge.ts a.json [b.json ...] [--json out.json] [--chart out.svg]");
  process.exit(2);
}
const runs = await Promise.all(positionals.map(async (p) => JSON.parse(await readFile(p, "utf8"), readInfinity) as DispatchResults));
const first = runs[0]!;
const key = (r: DispatchResults): string =>
  JSON.stringify([r.seed, r.workers, r.gateways, r.models, r.runtime, r.zipf, r.burstFactor, r.secondsPerPoint, r.loneMedianMs, r.slos]);
for (const [i, r] of runs.entries()) {
  if (key(r) !== key(first)) throw new Error(`${positionals[i]} was run with another configuration than ${positionals[0]}: ${key(r)} vs ${key(first)}`);
}
const merged: DispatchResults = {
  ...first,
  command: runs.map((r) => r.command).join(" + "),
  arms: runs.flatMap((r) => r.arms),
};
console.log(reportLines(merged).join("\n"));
if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(merged, writeInfinity, 2)}\n`);
if (values.chart !== undefined) await writeFile(values.chart, await dispatchChartSvg(merged));
