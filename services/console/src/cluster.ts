import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { GetClusterResponse, LaneLag, ResidentModel, WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { ResidencyState, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { h } from "./dom.ts";
import { formatMs } from "./latency.ts";
import { percent } from "./scores.ts";

/** What the page knows of ClusterService.GetCluster. */
export interface ClusterView {
  /** The last answer that came back; kept (and shown as stale) while later calls fail. */
  cluster: GetClusterResponse | undefined;
  /** Why the latest call failed; undefined when it succeeded (or none finished yet). */
  clusterError: string | undefined;
  /** When `cluster` was received. */
  clusterAt: Date | undefined;
}

export type StateName = "queued" | "loading" | "resident" | "failed" | "evicted" | "unknown";

export function stateName(state: ResidencyState): StateName {
  switch (state) {
    case ResidencyState.LOADING:
      return "loading";
    case ResidencyState.RESIDENT:
      return "resident";
    case ResidencyState.FAILED:
      return "failed";
    case ResidencyState.QUEUED:
      return "queued";
    case ResidencyState.EVICTED:
      return "evicted";
    default:
      return "unknown";
  }
}

/** The models a worker holds, loads or awaits (evicted ones are history, not shown as chips). */
export function held(w: WorkerStatus): ResidentModel[] {
  return w.models.filter((m) => m.state !== ResidencyState.EVICTED);
}

export function laneLabel(lane: Lane): string {
  return lane === Lane.INTERACTIVE ? "interactive" : lane === Lane.BATCH ? "batch" : "unspecified";
}

/** Bytes for people, binary units: "0 B", "512 KiB", "1.5 GiB". */
export function formatBytes(bytes: bigint | number): string {
  let n = Number(bytes);
  if (!Number.isFinite(n) || n < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[u]}`;
}

/** Used over budget, 0..1 (above 1 when over budget); undefined without a budget. */
export function memoryFraction(used: bigint | number, budget: bigint | number): number | undefined {
  const b = Number(budget);
  return b > 0 ? Number(used) / b : undefined;
}

/** Figures of the whole cluster, for the glance cards. */
export interface ClusterTotals {
  readonly workers: number;
  readonly draining: number;
  /** Workers per execution provider ("cpu", "cuda"), in first-seen order. */
  readonly providers: ReadonlyMap<string, number>;
  readonly resident: number;
  readonly loading: number;
  readonly failed: number;
  readonly pinned: number;
  readonly memoryUsed: number;
  readonly memoryBudget: number;
  readonly lagRecords: number;
  /** Records behind per lane name, over every pool. */
  readonly lagByLane: ReadonlyMap<string, number>;
}

export function clusterTotals(c: GetClusterResponse): ClusterTotals {
  const providers = new Map<string, number>();
  const lagByLane = new Map<string, number>();
  let draining = 0;
  let resident = 0;
  let loading = 0;
  let failed = 0;
  let pinned = 0;
  let memoryUsed = 0;
  let memoryBudget = 0;
  let lagRecords = 0;
  for (const w of c.workers) {
    if (w.draining) draining++;
    const provider = w.provider || "unknown";
    providers.set(provider, (providers.get(provider) ?? 0) + 1);
    memoryUsed += Number(w.memoryUsedBytes);
    memoryBudget += Number(w.memoryBudgetBytes);
    for (const m of held(w)) {
      const s = stateName(m.state);
      if (s === "resident") resident++;
      else if (s === "loading") loading++;
      else if (s === "failed") failed++;
      if (m.pinned) pinned++;
    }
  }
  for (const l of c.lanes) {
    const n = Number(l.records);
    lagRecords += n;
    lagByLane.set(laneLabel(l.lane), (lagByLane.get(laneLabel(l.lane)) ?? 0) + n);
  }
  return { workers: c.workers.length, draining, providers, resident, loading, failed, pinned, memoryUsed, memoryBudget, lagRecords, lagByLane };
}

/** Lag as a pool × lane grid: pools sorted, lanes interactive then batch (then any other). */
export interface LaneGrid {
  readonly pools: readonly string[];
  readonly lanes: readonly Lane[];
  /** Records behind; undefined when the gateway did not report that lane of that pool. */
  records(pool: string, lane: Lane): number | undefined;
  /** The largest lag in the grid (at least 1, to scale bars). */
  readonly max: number;
}

export function laneGrid(lags: readonly LaneLag[]): LaneGrid {
  const cells = new Map<string, number>();
  const pools = new Set<string>();
  const lanes = new Set<Lane>([Lane.INTERACTIVE, Lane.BATCH]);
  let max = 1;
  for (const l of lags) {
    pools.add(l.pool);
    lanes.add(l.lane);
    const n = Number(l.records);
    cells.set(`${l.pool}\n${l.lane}`, (cells.get(`${l.pool}\n${l.lane}`) ?? 0) + n);
    max = Math.max(max, n);
  }
  const order = (lane: Lane): number => (lane === Lane.INTERACTIVE ? 0 : lane === Lane.BATCH ? 1 : 2 + lane);
  return {
    pools: [...pools].sort(),
    lanes: [...lanes].sort((a, b) => order(a) - order(b)).filter((l) => l !== Lane.UNSPECIFIED || lags.some((x) => x.lane === l)),
    records: (pool, lane) => cells.get(`${pool}\n${lane}`),
    max,
  };
}

/** A thin horizontal bar; `tone` colours it (warn above 85% memory, say). */
function bar(fraction: number, tone?: "warn" | "bad"): HTMLElement {
  const fill = h("span", { class: "fill" });
  fill.style.width = percent(fraction);
  return h("span", { class: "bar", "data-tone": tone }, fill);
}

function chip(r: ResidentModel): HTMLElement {
  const state = stateName(r.state);
  const title = [
    `${r.model}: ${state}${r.pinned ? " · pinned" : ""}`,
    `memory ${formatBytes(r.memoryBytes)} · in flight ${r.inFlightJobs}`,
    `loads ${r.loadCount} · evictions ${r.evictionCount} · last cold start ${formatMs(r.lastColdStartMs || undefined)}`,
    state === "failed" && r.error ? `error: ${r.error}` : "",
  ]
    .filter((l) => l !== "")
    .join("\n");
  return h(
    "span",
    { class: "chip", "data-state": state, "data-model": r.model, "data-pinned": r.pinned, title },
    h("span", { class: "state-dot", "aria-hidden": "true" }),
    r.model,
    r.pinned ? h("span", { class: "pin", title: "pinned: kept resident" }, "pin") : null,
  );
}

function workerRow(w: WorkerStatus, observedUnixMs: bigint): HTMLElement {
  const mem = memoryFraction(w.memoryUsedBytes, w.memoryBudgetBytes);
  const ageMs = Number(observedUnixMs - w.updatedUnixMs);
  const stale = w.intervalMs > 0 && ageMs > 2 * w.intervalMs;
  return h(
    "tr",
    { "data-worker": w.workerId, "data-draining": w.draining, class: stale ? "stale" : undefined },
    h(
      "td",
      {
        title: `started ${new Date(Number(w.startedUnixMs)).toLocaleString()} · status ${formatMs(Math.max(0, ageMs))} old · policy ${w.residencyPolicy || "—"} · thrash ${w.thrashEvents}`,
      },
      h("code", {}, w.workerId),
      w.draining ? h("span", { class: "badge", "data-tone": "warn" }, "draining") : null,
    ),
    h("td", {}, w.pool),
    h("td", {}, w.provider || "—"),
    h(
      "td",
      { class: "mem" },
      mem === undefined ? h("span", { class: "muted" }, "no budget") : bar(mem, mem > 1 ? "bad" : mem > 0.85 ? "warn" : undefined),
      h("span", { class: "bar-text" }, `${formatBytes(w.memoryUsedBytes)} / ${mem === undefined ? "—" : formatBytes(w.memoryBudgetBytes)}`),
    ),
    h("td", { class: "num" }, w.inFlightJobs),
    h("td", { class: "chips" }, ...(held(w).length === 0 ? [h("span", { class: "muted" }, "no models loaded")] : held(w).map(chip))),
  );
}

function lanesTable(c: GetClusterResponse): HTMLElement {
  const grid = laneGrid(c.lanes);
  if (grid.pools.length === 0) return h("p", { class: "muted" }, "no lane lag reported");
  return h(
    "table",
    { id: "lanes-table", class: "grid lanes" },
    h("thead", {}, h("tr", {}, h("th", {}, "pool"), ...grid.lanes.map((l) => h("th", {}, `${laneLabel(l)} lag`)))),
    h(
      "tbody",
      {},
      ...grid.pools.map((pool) =>
        h(
          "tr",
          { "data-pool": pool },
          h("td", {}, pool),
          ...grid.lanes.map((lane) => {
            const n = grid.records(pool, lane);
            return h(
              "td",
              { class: "lag", "data-lane": laneLabel(lane), title: n === undefined ? "not reported" : `${n} records behind` },
              n === undefined ? h("span", { class: "muted" }, "—") : bar(n / grid.max, n > 0 ? "warn" : undefined),
              h("span", { class: "bar-text" }, n === undefined ? "" : n.toLocaleString()),
            );
          }),
        ),
      ),
    ),
  );
}

/**
 * Draws the workers (memory bar, in-flight jobs, resident models with state and pin) and the lag
 * of every lane per pool. Never throws for a missing or failing ClusterService: it says so in a
 * muted line and keeps the last answer, dimmed.
 */
export function renderCluster(box: HTMLElement, view: ClusterView): void {
  const c = view.cluster;
  const note =
    view.clusterError === undefined
      ? null
      : h(
          "p",
          { id: "cluster-unavailable", class: "muted cluster-note", title: view.clusterError },
          "cluster state unavailable",
          c && view.clusterAt ? ` · showing ${view.clusterAt.toLocaleTimeString()}` : "",
        );
  if (!c) {
    box.replaceChildren(note ?? h("p", { class: "muted cluster-note" }, "reading cluster state…"));
    return;
  }
  box.classList.toggle("stale", view.clusterError !== undefined);
  const workers =
    c.workers.length === 0
      ? h("p", { class: "muted" }, "no live workers")
      : h(
          "table",
          { id: "workers-table", class: "grid workers" },
          h("thead", {}, h("tr", {}, ...["worker", "pool", "provider", "memory", "in flight", "models"].map((t) => h("th", {}, t)))),
          h("tbody", {}, ...c.workers.map((w) => workerRow(w, c.observedUnixMs))),
        );
  box.replaceChildren(
    ...[note, h("div", { class: "cluster-workers" }, workers), h("div", { class: "cluster-lanes" }, lanesTable(c))].filter((n) => n !== null),
  );
}

/** Per replica: the worker and the model's state there; summed as a short line in the models table. */
export function replicaSummary(m: Model): { text: string; states: StateName[] } {
  const states = m.replicas.map((r) => stateName(r.state));
  if (states.length === 0) return { text: "not loaded", states };
  const counts = new Map<StateName, number>();
  for (const s of states) counts.set(s, (counts.get(s) ?? 0) + 1);
  const order: StateName[] = ["resident", "loading", "failed", "unknown"];
  return {
    text: order
      .filter((s) => counts.has(s))
      .map((s) => `${counts.get(s)} ${s}`)
      .join(" · "),
    states,
  };
}

/** The models table's residency cell: one dot per replica (title names the worker), then the counts. */
export function replicasCell(m: Model): HTMLElement {
  const { text, states } = replicaSummary(m);
  return h(
    "td",
    { class: "replicas", "data-replicas": m.replicas.length, title: m.replicas.map((r) => `${r.workerId}: ${stateName(r.state)}`).join("\n") || undefined },
    ...states.map((s) => h("span", { class: "state-dot", "data-state": s, "aria-hidden": "true" })),
    h("span", { class: states.length === 0 ? "muted" : undefined }, text),
  );
}
