import type { ServerTiming } from "./api.ts";
import { h } from "./dom.ts";
import { formatMs, type LatencyWindow } from "./latency.ts";

/** Everything the "cluster at a glance" panel knows. New sources (workers, consumer lag, resident models) add fields here. */
export interface ClusterSnapshot {
  /** Undefined until the first refresh answers or fails. */
  reachable: boolean | undefined;
  lastRefresh: Date | undefined;
  /** Round trip of the last ListModels, as the page measured it. */
  listModelsMs: number | undefined;
  modelCount: number | undefined;
  /** Embed round trips measured by this page. */
  readonly embedRoundTrips: LatencyWindow;
  /** The gateway's timing headers of the last Embed. */
  lastEmbed: ServerTiming | undefined;
  error: string | undefined;
}

/** One card of the panel: a label, a value and an optional hint line, all derived from the snapshot. */
export interface GlanceField {
  readonly id: string;
  readonly label: string;
  value(s: ClusterSnapshot): string;
  hint?(s: ClusterSnapshot): string | undefined;
  /** "ok" | "bad" colours the value; undefined leaves it neutral. */
  tone?(s: ClusterSnapshot): "ok" | "bad" | undefined;
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
    id: "last-embed",
    label: "Last Embed (gateway)",
    value: (s) => formatMs(s.lastEmbed?.totalMs),
    hint: (s) =>
      s.lastEmbed
        ? `queue ${formatMs(s.lastEmbed.queueMs)} · tokenize ${formatMs(s.lastEmbed.tokenizeMs)} · inference ${formatMs(s.lastEmbed.inferenceMs)}`
        : "timing headers appear after a call",
  },
  {
    id: "worker",
    label: "Last worker",
    value: (s) => s.lastEmbed?.worker ?? "—",
    hint: () => "answered the last Embed",
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
  }
}
