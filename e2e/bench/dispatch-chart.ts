/**
 * The chart of `npm run bench:dispatch` (issue #16), drawn with Vega-Lite into an SVG: request p99
 * against offered load per arm (the SLO lines across), and each arm's knee against the SLO.
 *
 *   node --import tsx e2e/bench/dispatch-chart.ts results.json docs/bench/dispatch.svg
 */
import { readFile, writeFile } from "node:fs/promises";
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import { liveKnees, readInfinity, type DispatchResults } from "./dispatch-report.ts";

/** Renders the results as an SVG document. */
export async function dispatchChartSvg(r: DispatchResults): Promise<string> {
  const latency = r.arms.flatMap((a) =>
    a.points.map((p) => ({
      arm: a.name,
      load: p.live.load,
      // A point with unanswered calls has an infinite p99: draw it at the top of the axis.
      p99: Number.isFinite(p.live.requestP99Ms) ? p.live.requestP99Ms : null,
    })),
  );
  const knees = r.arms.flatMap((a) => liveKnees(a, r.slos).map((k, s) => ({ arm: a.name, slo: `${r.slos[s]!.k}x`, knee: k.load })));
  const slos = r.slos.map((s) => ({ slo: `${s.k}x SLO`, ms: s.ms }));
  const color = { field: "arm", type: "nominal", title: "arm", sort: r.arms.map((a) => a.name), legend: { labelLimit: 480 } } as const;
  const spec: TopLevelSpec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: {
      text: `Shoal dispatch: shared queue vs routers — ${r.workers} workers on ${r.runtime}, ${r.models} model(s), seed ${r.seed}`,
      subtitle: [`live cluster (gateway → Kafka → workers); lone median request ${r.loneMedianMs.toFixed(0)} ms`, r.command],
    },
    hconcat: [
      {
        width: 420,
        height: 300,
        title: "agent-request p99 vs offered load",
        layer: [
          {
            data: { values: latency },
            mark: { type: "line", point: true },
            encoding: {
              x: { field: "load", type: "quantitative", title: "offered load ρ (unbatched work ÷ capacity)" },
              y: { field: "p99", type: "quantitative", title: "request p99 (ms, log)", scale: { type: "log" } },
              color,
            },
          },
          {
            data: { values: slos },
            mark: { type: "rule", strokeDash: [4, 4], color: "#888" },
            encoding: { y: { field: "ms", type: "quantitative" } },
          },
          {
            data: { values: slos },
            mark: { type: "text", align: "left", dx: 4, dy: -6, color: "#555" },
            encoding: { y: { field: "ms", type: "quantitative" }, x: { value: 0 }, text: { field: "slo" } },
          },
        ],
      },
      {
        width: 300,
        height: 300,
        title: "knee (highest ρ within SLO, ≥ 99% answered)",
        data: { values: knees },
        mark: "bar",
        encoding: {
          x: { field: "slo", type: "nominal", title: "SLO (× lone median request)", sort: r.slos.map((s) => `${s.k}x`) },
          xOffset: { field: "arm", sort: r.arms.map((a) => a.name) },
          y: { field: "knee", type: "quantitative", title: "knee ρ" },
          color,
        },
      },
    ],
    config: { font: "sans-serif" },
  };
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  return view.toSVG();
}

if (import.meta.main) {
  const [input, output] = process.argv.slice(2);
  if (input === undefined || output === undefined) {
    console.error("usage: dispatch-chart.ts results.json out.svg");
    process.exit(2);
  }
  const results = JSON.parse(await readFile(input, "utf8"), readInfinity) as DispatchResults;
  await writeFile(output, await dispatchChartSvg(results));
  console.error(`wrote ${output}`);
}
