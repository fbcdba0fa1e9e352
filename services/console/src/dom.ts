type Attrs = Record<string, string | number | boolean | undefined>;
type Child = Node | string | number | null | undefined | false;

/** A tiny element factory: `h("td", { class: "cell" }, "0.93")`. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return el;
}

/** The element with this id, typed; throws if the page lacks it (a build mistake, not a runtime state). */
export function byId<T extends HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing from index.html`);
  return el as T;
}

/** The non-empty lines of a textarea, trimmed. */
export function linesOf(text: string): string[] {
  return text
    .split("\n")
    .map((t) => t.trim())
    .filter((t) => t !== "");
}

/**
 * Sets a model picker's options, keeping the current choice when it is still offered. Rebuilt
 * only when the ids change, so a periodic refresh never closes an open picker. Disabled when
 * there is nothing to pick.
 */
export function fillSelect(select: HTMLSelectElement, options: readonly { readonly value: string; readonly label: string }[]): void {
  const current = select.value;
  const ids = options.map((o) => o.value);
  const shown = [...select.options].map((o) => o.value);
  if (ids.join("\n") !== shown.join("\n")) {
    select.replaceChildren(...options.map((o) => h("option", { value: o.value }, o.label)));
    if (ids.includes(current)) select.value = current;
  }
  select.disabled = options.length === 0;
}
