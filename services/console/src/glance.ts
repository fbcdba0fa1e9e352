import type { ServerTiming } from "./api.ts";
import { clusterTotals, formatBytes, type ClusterTotals, type ClusterView } from "./cluster.ts";
import { h } from "./dom.ts";
import { formatMs, type LatencyWindow } from "./latency.ts";

/** The InferenceService calls the page makes. */
export type InferenceMethod = "Embed" | "Rerank" | "Classify";

/**
 * Everything the "cluster at a glance" panel knows: the gateway (ListModels), the cluster
 * (ClusterService.GetCluster: workers, resident models, lane lag) and this page's own calls.
 */
export interface ClusterSnapshot extends ClusterView {
  /** Undefined until the first refresh answers or fails. */
  reachable: boolean | undefined;
  lastRefresh: Date | undefined;
  /** Round trip of the last ListModels, as the page measured it. */
  listModelsMs: number | undefined;
  modelCount: number | undefined;
  /** Embed round trips measured by this page. */
  readonly embedRoundTrips: LatencyWindow;
  /** The gateway's timing headers of the last inference call (Embed, Rerank or Classify). */
  lastCall: { readonly method: InferenceMethod; readonly server: ServerTiming } | undefined;
  error: string | undefined;
}

/** Totals of the last GetCluster answer; undefined while there is none. */
function totals(s: ClusterSnapshot): ClusterTotals | undefined {
  return s.cluster && clusterTotals(s.cluster);
}

/** The hint of a cluster card while GetCluster has not answered (or failed). */
function clusterHint(s: ClusterSnapshot): string {
  return s.clusterError === undefined ? "reading cluster state…" : "cluster state unavailable";
}

/** Cluster cards are hidden while GetCluster has never answered and fails (the muted line below says so). */
function hasClusterState(s: ClusterSnapshot): boolean {
  return s.cluster !== undefined || s.clusterError === undefined;
}

/** One card of the panel: a label, a value and an optional hint line, all derived from the snapshot. */
export interface GlanceField {
  readonly id: string;
  readonly label: string;
  value(s: ClusterSnapshot): string;
  hint?(s: ClusterSnapshot): string | undefined;
  /** "ok" | "bad" colours the value; undefined leaves it neutral. */
  tone?(s: ClusterSnapshot): "ok" | "bad" | undefined;
  /** False hides the card (cluster cards, while the gateway has no cluster state to give). Default shown. */
  visible?(s: ClusterSnapshot): boolean;
}

/** The panel's cards, in display order. Add a field to show a new figure; nothing else changes. */
export const GLANCE_FIELDS: readonly GlanceField[] = [
  {
    id: "gateway",
    label: "Gateway",
    value: (s) => (s.reachable === undefined ? "…" : s.reachable ? "reachable" : "unreachable"),
    hint: (s) => (s.reachable === false ? s.error : `ListModels ${formatMs(s.listModelsMs)}`),
    tone: (s) => (s.reachable === undefined ? undefined : s.reachable ? "ok" : "bad"),
  },
  {
    id: "models",
    label: "Models served",
    value: (s) => (s.modelCount === undefined ? "—" : String(s.modelCount)),
    hint: (s) => (s.lastRefresh ? `refreshed ${s.lastRefresh.toLocaleTimeString()}` : undefined),
  },
  {
    id: "embed-p50",
    label: "Embed p50 (this page)",
    value: (s) => formatMs(s.embedRoundTrips.percentile(50)),
    hint: (s) => (s.embedRoundTrips.count === 0 ? "no calls yet" : `p95 ${formatMs(s.embedRoundTrips.percentile(95))} · ${s.embedRoundTrips.count} calls`),
  },
  {
    id: "workers",
    visible: hasClusterState,
    label: "Workers",
    value: (s) => (s.cluster ? String(s.cluster.workers.length) : "—"),
    hint: (s) => {
      const t = totals(s);
      if (!t) return clusterHint(s);
      const providers = [...t.providers].map(([p, n]) => `${n} ${p}`);
      return [...providers, t.draining > 0 ? `${t.draining} draining` : ""].filter((x) => x !== "").join(" · ") || "none live";
    },
    tone: (s) => (s.cluster ? (s.cluster.workers.length > 0 ? "ok" : "bad") : undefined),
  },
  {
    id: "resident",
    visible: hasClusterState,
    label: "Resident models",
    value: (s) => (s.cluster ? String(totals(s)?.resident ?? 0) : "—"),
    hint: (s) => {
      const t = totals(s);
      return t ? `${t.loading} loading · ${t.failed} failed · ${t.pinned} pinned` : clusterHint(s);
    },
    tone: (s) => ((totals(s)?.failed ?? 0) > 0 ? "bad" : undefined),
  },
  {
    id: "memory",
    visible: hasClusterState,
    label: "Worker memory",
    value: (s) => {
      const t = totals(s);
      return t && t.memoryBudget > 0 ? `${Math.round((t.memoryUsed / t.memoryBudget) * 100)}%` : "—";
    },
    hint: (s) => {
      const t = totals(s);
      return t ? `${formatBytes(t.memoryUsed)} of ${t.memoryBudget > 0 ? formatBytes(t.memoryBudget) : "no budget"}` : clusterHint(s);
    },
  },
  {
    id: "lag",
    visible: hasClusterState,
    label: "Queue lag",
    value: (s) => {
      const t = totals(s);
      return t ? `${t.lagRecords.toLocaleString()}` : "—";
    },
    hint: (s) => {
      const t = totals(s);
      return t ? [...t.lagByLane].map(([lane, n]) => `${lane} ${n.toLocaleString()}`).join(" · ") || "records behind" : clusterHint(s);
    },
  },
  {
    id: "last-embed",
    label: "Last call (gateway)",
    value: (s) => formatMs(s.lastCall?.server.totalMs),
    hint: (s) =>
      s.lastCall
        ? `${s.lastCall.method} · queue ${formatMs(s.lastCall.server.queueMs)} · tokenize ${formatMs(s.lastCall.server.tokenizeMs)} · inference ${formatMs(s.lastCall.server.inferenceMs)}`
        : "timing headers appear after a call",
  },
  {
    id: "worker",
    label: "Last worker",
    value: (s) => s.lastCall?.server.worker ?? "—",
    hint: (s) => `answered the last ${s.lastCall?.method ?? "call"}`,
  },
];

/** Draws the cards once, then only updates their text. */
export function renderGlance(container: HTMLElement, s: ClusterSnapshot, fields: readonly GlanceField[] = GLANCE_FIELDS): void {
  for (const f of fields) {
    let card = container.querySelector<HTMLElement>(`[data-field="${f.id}"]`);
    if (!card) {
      card = h("div", { class: "card", "data-field": f.id }, h("div", { class: "label" }, f.label), h("div", { class: "value" }), h("div", { class: "hint" }));
      container.append(card);
    }
    const value = card.querySelector<HTMLElement>(".value")!;
    value.textContent = f.value(s);
    value.dataset["tone"] = f.tone?.(s) ?? "";
    card.querySelector<HTMLElement>(".hint")!.textContent = f.hint?.(s) ?? "";
    card.hidden = !(f.visible?.(s) ?? true);
  }
}
