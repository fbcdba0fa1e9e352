import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { replicasCell } from "./cluster.ts";
import { h } from "./dom.ts";
import { formatMs } from "./latency.ts";
import { shortRevision } from "./registry.ts";

/** The models table's columns, in order (the last one holds each row's remove button). */
export const MODEL_COLUMNS = [
  "id",
  "task",
  "source",
  "revision",
  "dimensions",
  "max tokens",
  "pool",
  "normalize",
  "replicas",
  "loads",
  "last cold start",
  "",
] as const;

/** A task's name for people: "embed", "rerank", "classify". */
export function taskName(task: Task): string {
  return (Task[task] ?? "unknown").toLowerCase();
}

/** "12 ms" for a cold start, "—" when the model was never loaded. */
function coldStart(ms: number): string {
  return ms > 0 ? formatMs(ms) : "—";
}

/** Where the model's files come from: a folder path or an `hf:` id, cut at the front in CSS, whole in the tooltip. */
function sourceCell(m: Model): HTMLElement {
  if (m.source === "") return h("td", { class: "source muted", "data-source": "" }, "—");
  const hub = m.source.startsWith("hf:");
  return h("td", { class: "source", "data-source": m.source, title: m.source }, h("code", { "data-kind": hub ? "hub" : "folder" }, m.source));
}

function revisionCell(m: Model): HTMLElement {
  return h(
    "td",
    { class: m.revision === "" ? "revision muted" : "revision", "data-revision": m.revision, title: m.revision || undefined },
    m.revision === "" ? "—" : h("code", {}, shortRevision(m.revision)),
  );
}

/**
 * One model's row; every text goes in as a text node or an attribute (sources and ids come from
 * users). `removing`: a RemoveModel for it is in flight (its button stays disabled across refreshes).
 */
export function modelRow(m: Model, removing = false): HTMLTableRowElement {
  return h(
    "tr",
    { "data-model": m.id, "data-task": taskName(m.task) },
    h(
      "td",
      { class: "id", title: m.origin || undefined },
      h("code", {}, m.id),
      m.pinned ? h("span", { class: "pin", title: "pinned: kept resident once loaded" }, "pin") : null,
      m.generated ? h("span", { class: "pin generated", title: "generated: random fixed weights, answers carry no meaning" }, "generated") : null,
      m.aliases.length === 0
        ? null
        : h(
            "div",
            { class: "aliases" },
            ...m.aliases.map((a) => h("span", { class: "alias", "data-alias": a, title: `alias: calls to '${a}' reach this model` }, a)),
          ),
    ),
    h(
      "td",
      {},
      taskName(m.task),
      // How its scores are computed (a cross-encoder's sigmoid, a bi-encoder's cosine, a zero-shot softmax).
      m.scoring ? h("div", { class: "scoring" }, m.scoring) : null,
    ),
    sourceCell(m),
    revisionCell(m),
    h("td", { class: "num", title: m.labels.length > 0 ? `labels: ${m.labels.join(", ")}` : undefined }, m.dimensions),
    h("td", { class: "num" }, m.maxSequenceLength),
    h("td", {}, m.pool),
    h("td", {}, m.task === Task.EMBED ? (m.normalizeDefault ? "yes" : "no") : "—"),
    replicasCell(m),
    h("td", { class: "num" }, String(m.loadCount)),
    h("td", { class: "num" }, coldStart(m.lastColdStartMs)),
    h(
      "td",
      { class: "actions" },
      // Handled by the registry panel through the table body (rows are rebuilt on every refresh).
      h(
        "button",
        { type: "button", class: "small remove", "data-remove": m.id, title: `remove '${m.id}' from the registry`, disabled: removing },
        removing ? "removing…" : "remove",
      ),
    ),
  );
}

/** Fills the models table: its header once, its rows on every refresh. */
export function renderModelRows(table: HTMLTableElement, models: readonly Model[], removing: ReadonlySet<string> = new Set()): void {
  if (table.tHead?.rows[0]?.cells.length !== MODEL_COLUMNS.length) {
    table.tHead?.replaceChildren(h("tr", {}, ...MODEL_COLUMNS.map((t) => h("th", {}, t))));
  }
  const body = table.tBodies[0] ?? table.createTBody();
  body.replaceChildren(...models.map((m) => modelRow(m, removing.has(m.id))));
}
