import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { ClassifyResponse, RerankResponse } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { ShoalApi, Timed } from "./api.ts";
import { fillSelect, h, linesOf } from "./dom.ts";
import { formatMs } from "./latency.ts";
import { barFractions, formatScore, percent } from "./scores.ts";

const MAX_TEXTS = 32;

const SAMPLE_QUERY = "Where do cats like to nap?";
const SAMPLE_DOCUMENTS = [
  "Quarterly revenue grew by twelve percent.",
  "A cat sleeps on the warm windowsill.",
  "The stock market closed higher today.",
  "Kittens nap in the afternoon sun.",
];
const SAMPLE_CLASSIFY = ["I love this, it works perfectly!", "Terrible service, I want a refund.", "The package arrived on Tuesday."];

/** Told about every successful call, for the glance panel. */
export type OnCall = (method: "Rerank" | "Classify", res: Timed<unknown>) => void;

interface Panel {
  readonly section: HTMLElement;
  readonly form: HTMLFormElement;
  readonly select: HTMLSelectElement;
  readonly button: HTMLButtonElement;
  readonly error: HTMLElement;
  readonly summary: HTMLElement;
  readonly results: HTMLElement;
  readonly empty: HTMLElement;
}

/** The skeleton of a try-it panel: title, model picker, `fields`, a button, the result area. */
function panel(id: string, title: string, action: string, task: string, fields: HTMLElement[], results: HTMLElement): Panel {
  const select = h("select", { id: `${id}-model`, required: true });
  const button = h("button", { id: `${id}-button`, type: "submit" }, action);
  const error = h("span", { id: `${id}-error`, class: "error", role: "alert" });
  const empty = h("p", { id: `${id}-empty`, class: "muted", hidden: true }, `This gateway serves no ${task} models.`);
  const form = h("form", { id: `${id}-form` }, h("label", {}, "model ", select), ...fields, h("div", { class: "row" }, button, error));
  const summary = h("p", { id: `${id}-summary`, class: "summary" });
  const section = h("section", { class: "panel try", "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), empty, form, summary, results);
  return { section, form, select, button, error, summary, results, empty };
}

/** Timing line shared by both panels. */
function timingText(res: Timed<unknown>, tokens: number): string {
  const s = res.server;
  return (
    ` · ${tokens} tokens · round trip ${formatMs(res.roundTripMs)}` +
    (s.totalMs === undefined ? "" : ` · gateway ${formatMs(s.totalMs)} (queue ${formatMs(s.queueMs)}, inference ${formatMs(s.inferenceMs)})`)
  );
}

function scoreBar(fraction: number): HTMLElement {
  const fill = h("span", { class: "fill" });
  fill.style.width = percent(fraction);
  return h("span", { class: "bar score-bar" }, fill);
}

/** Runs `call` with the button disabled; shows the error (Connect's message) next to it. */
function busy<T>(p: Panel, label: string, busyLabel: string, call: () => Promise<T>, done: (value: T) => void, messageOf: (err: unknown) => string): void {
  p.error.textContent = "";
  p.button.disabled = true;
  p.button.textContent = busyLabel;
  call()
    .then(done)
    .catch((err: unknown) => {
      p.error.textContent = messageOf(err);
    })
    .finally(() => {
      p.button.disabled = p.select.options.length === 0;
      p.button.textContent = label;
    });
}

function renderRanking(p: Panel, res: Timed<RerankResponse>): void {
  const results = res.value.results;
  const fractions = barFractions(results.map((r) => r.score));
  p.summary.replaceChildren(h("strong", { id: "rerank-count" }, results.length), " documents ranked", timingText(res, res.value.usage?.totalTokens ?? 0));
  p.results.replaceChildren(
    ...results.map((r, rank) =>
      h(
        "li",
        { "data-index": r.index, "data-score": r.score, title: `document #${r.index + 1} · ${r.tokens} tokens${r.truncated ? " · truncated" : ""}` },
        h("span", { class: "rank" }, rank + 1),
        scoreBar(fractions[rank] ?? 0),
        h("span", { class: "score" }, formatScore(r.score)),
        h("span", { class: "doc" }, r.document, r.truncated ? h("span", { class: "badge", "data-tone": "warn" }, "truncated") : null),
        h("span", { class: "idx" }, `#${r.index + 1}`),
      ),
    ),
  );
}

function renderLabels(p: Panel, texts: readonly string[], res: Timed<ClassifyResponse>): void {
  const list = res.value.classifications;
  p.summary.replaceChildren(
    h("strong", { id: "classify-count" }, list.length),
    ` texts × ${list[0]?.labels.length ?? 0} labels`,
    timingText(res, res.value.usage?.totalTokens ?? 0),
  );
  p.results.replaceChildren(
    ...list.map((c) => {
      const fractions = barFractions(c.labels.map((l) => l.score));
      return h(
        "div",
        { class: "classification", "data-index": c.index },
        h(
          "div",
          { class: "text", title: `${c.tokens} tokens${c.truncated ? " · truncated" : ""}` },
          h("span", { class: "idx" }, `#${c.index + 1}`),
          " ",
          texts[c.index] ?? "",
        ),
        ...c.labels.map((l, i) =>
          h(
            "div",
            { class: "label-row", "data-label": l.label, "data-score": l.score, "data-top": i === 0 },
            h("span", { class: "label" }, l.label),
            scoreBar(fractions[i] ?? 0),
            h("span", { class: "score" }, formatScore(l.score)),
          ),
        ),
      );
    }),
  );
}

/**
 * Adds the Rerank and Classify try-it panels (side by side on wide screens) after `anchor` (the
 * Embed panel). `setModels` keeps each picker to the models of its task.
 */
export function mountScorePanels(
  anchor: HTMLElement,
  api: ShoalApi,
  onCall: OnCall,
  messageOf: (err: unknown) => string,
): { setModels(models: readonly Model[]): void } {
  const query = h("input", { id: "rerank-query", type: "text", value: SAMPLE_QUERY, spellcheck: "false", required: true });
  const docs = h("textarea", { id: "rerank-docs", rows: 6, spellcheck: "false" }, SAMPLE_DOCUMENTS.join("\n"));
  const rerank = panel(
    "rerank",
    "Try Rerank",
    "Rerank",
    "rerank",
    [h("label", {}, "query", query), h("label", { class: "texts" }, "documents, one per line", docs)],
    h("ol", { id: "rerank-results", class: "ranked" }),
  );
  const texts = h("textarea", { id: "classify-texts", rows: 6, spellcheck: "false" }, SAMPLE_CLASSIFY.join("\n"));
  const classify = panel(
    "classify",
    "Try Classify",
    "Classify",
    "classification",
    [h("label", { class: "texts" }, "texts, one per line", texts)],
    h("div", { id: "classify-results", class: "classifications" }),
  );
  anchor.after(h("div", { class: "try-row" }, rerank.section, classify.section));

  rerank.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const documents = linesOf(docs.value);
    const q = query.value.trim();
    rerank.error.textContent = "";
    if (q === "") {
      rerank.error.textContent = "enter a query";
      return;
    }
    if (documents.length === 0) {
      rerank.error.textContent = "enter at least one document";
      return;
    }
    if (documents.length > MAX_TEXTS) {
      rerank.error.textContent = `at most ${MAX_TEXTS} documents here`;
      return;
    }
    busy(
      rerank,
      "Rerank",
      "Ranking…",
      () => api.rerank(rerank.select.value, q, documents),
      (res) => {
        renderRanking(rerank, res);
        onCall("Rerank", res);
      },
      messageOf,
    );
  });

  classify.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const inputs = linesOf(texts.value);
    classify.error.textContent = "";
    if (inputs.length === 0) {
      classify.error.textContent = "enter at least one text";
      return;
    }
    if (inputs.length > MAX_TEXTS) {
      classify.error.textContent = `at most ${MAX_TEXTS} texts here`;
      return;
    }
    busy(
      classify,
      "Classify",
      "Classifying…",
      () => api.classify(classify.select.value, inputs),
      (res) => {
        renderLabels(classify, inputs, res);
        onCall("Classify", res);
      },
      messageOf,
    );
  });

  function sync(p: Panel, models: readonly Model[], label: (m: Model) => string): void {
    fillSelect(
      p.select,
      models.map((m) => ({ value: m.id, label: label(m) })),
    );
    const none = models.length === 0;
    p.empty.hidden = !none;
    p.form.classList.toggle("disabled", none);
    // A call in flight re-enables the button itself when it ends.
    if (!p.button.textContent?.endsWith("…")) p.button.disabled = none;
  }

  return {
    setModels(models) {
      sync(
        rerank,
        models.filter((m) => m.task === Task.RERANK),
        (m) => `${m.id} (max ${m.maxSequenceLength} tokens)`,
      );
      sync(
        classify,
        models.filter((m) => m.task === Task.CLASSIFY),
        (m) => `${m.id} (${m.labels.length > 0 ? m.labels.join(", ") : `${m.dimensions} labels`})`,
      );
    },
  };
}
