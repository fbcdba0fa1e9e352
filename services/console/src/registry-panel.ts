import "./registry.css";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import type { ShoalApi } from "./api.ts";
import { h } from "./dom.ts";
import { formatMs } from "./latency.ts";
import { addRequestOf, defaultPool, refusalOf, shortRevision } from "./registry.ts";

/** How often the "adding… 3 s" line ticks while AddModel runs (a Hub download can take a while). */
const PROGRESS_TICK_MS = 250;

function showRefusal(box: HTMLElement, err: unknown): void {
  const r = refusalOf(err);
  box.dataset["code"] = r.code;
  box.replaceChildren(
    h("strong", { class: "code" }, r.code),
    ": ",
    h("span", { class: "message" }, r.message),
    ...(r.hint ? [h("div", { class: "hint" }, r.hint)] : []),
  );
}

function clearRefusal(box: HTMLElement): void {
  delete box.dataset["code"];
  box.replaceChildren();
}

/** The registry panel's handle for the page: it feeds it the listed models and asks which are being removed. */
export interface RegistryPanel {
  setModels(models: readonly Model[]): void;
  /** Models a RemoveModel is in flight for (their buttons stay disabled across refreshes). */
  readonly removing: ReadonlySet<string>;
}

/**
 * Adds the "Add a model" form (ModelAdminService.AddModel) after the models table, and
 * handles the table's remove buttons (RemoveModel, after a confirm). `changed` refreshes the list.
 * A refusal shows its code and the gateway's message and keeps what was typed.
 */
export function mountRegistryPanel(table: HTMLTableElement, api: ShoalApi, changed: () => void): RegistryPanel {
  const source = h("input", {
    id: "add-model-source",
    type: "text",
    required: true,
    spellcheck: "false",
    autocomplete: "off",
    placeholder: "/models/my-embedder  or  hf:BAAI/bge-small-en-v1.5@main",
  });
  const id = h("input", { id: "add-model-id", type: "text", spellcheck: "false", autocomplete: "off", placeholder: "empty: the model's own id" });
  const pools = h("datalist", { id: "add-model-pools" });
  const pool = h("input", { id: "add-model-pool", type: "text", spellcheck: "false", autocomplete: "off", list: "add-model-pools", placeholder: "default" });
  const pinned = h("input", { id: "add-model-pinned", type: "checkbox" });
  const button = h("button", { id: "add-model-button", type: "submit" }, "Add model");
  const progress = h("span", { id: "add-model-progress", class: "progress muted", role: "status", hidden: true });
  const result = h("span", { id: "add-model-result", class: "muted" });
  const error = h("div", { id: "add-model-error", class: "error", role: "alert" });
  const fields = h(
    "fieldset",
    { class: "add-fields" },
    h("label", { class: "source" }, "source", source),
    h("label", {}, "id", id),
    h("label", {}, "pool", pool, pools),
    h("label", { class: "check" }, pinned, " pinned"),
  );
  const form = h("form", { id: "add-model-form", class: "add-model" }, fields, h("div", { class: "row" }, button, progress, result), error);
  const removeError = h("div", { id: "models-error", class: "error", role: "alert" });
  table.after(removeError, h("h3", { id: "add-model-title" }, "Add a model"), form);
  form.setAttribute("aria-labelledby", "add-model-title");

  /** The pool the field was last filled with by the page: replaced on refresh only while the user has not changed it. */
  let autoPool = "";
  const removing = new Set<string>();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const { request, problem } = addRequestOf({ source: source.value, id: id.value, pool: pool.value, pinned: pinned.checked });
    result.textContent = "";
    clearRefusal(error);
    if (problem !== undefined) {
      error.textContent = problem;
      return;
    }
    const started = performance.now();
    const tick = (): void => {
      progress.textContent = `adding ${request.id || request.source}… ${((performance.now() - started) / 1_000).toFixed(0)} s (a Hub download can take a while)`;
    };
    tick();
    progress.hidden = false;
    const timer = setInterval(tick, PROGRESS_TICK_MS);
    // Disabled fields keep their values: a refusal leaves the form as it was typed.
    fields.disabled = true;
    button.disabled = true;
    button.textContent = "Adding…";
    api
      .addModel(request)
      .then((res) => {
        const m = res.value;
        const revision = m?.revision ? ` · revision ${shortRevision(m.revision)}` : "";
        result.textContent = `added '${m?.id ?? request.id}'${revision} in ${formatMs(res.roundTripMs)}`;
        source.value = "";
        id.value = "";
        changed();
      })
      .catch((err: unknown) => showRefusal(error, err))
      .finally(() => {
        clearInterval(timer);
        progress.hidden = true;
        fields.disabled = false;
        button.disabled = false;
        button.textContent = "Add model";
      });
  });

  table.tBodies[0]?.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target.closest<HTMLButtonElement>("button[data-remove]") : null;
    const model = target?.dataset["remove"];
    if (!target || model === undefined || removing.has(model)) return;
    if (!window.confirm(`Remove model '${model}'? Calls already accepted finish; new calls get NotFound.`)) return;
    removing.add(model);
    target.disabled = true;
    target.textContent = "removing…";
    clearRefusal(removeError);
    api
      .removeModel(model)
      .catch((err: unknown) => showRefusal(removeError, err))
      .finally(() => {
        removing.delete(model);
        changed();
      });
  });

  return {
    removing,
    setModels(models) {
      const names = [...new Set(models.map((m) => m.pool).filter((p) => p !== ""))];
      if ([...pools.options].map((o) => o.value).join("\n") !== names.join("\n")) {
        pools.replaceChildren(...names.map((p) => h("option", { value: p })));
      }
      const suggested = defaultPool(models);
      if (pool.value === autoPool && suggested !== "") {
        pool.value = suggested;
        autoPool = suggested;
      }
    },
  };
}
