import "./api-key.css";
import { authProblem, type ApiKeyStore } from "./api-key.ts";
import { h } from "./dom.ts";

/** The header's API key field: what the page shows about the key and the last call's auth outcome. */
export interface ApiKeyField {
  /**
   * Shows how the last ListModels went with the current key: undefined for success, else its
   * error (only Unauthenticated and PermissionDenied change the field).
   */
  report(err: unknown): void;
  /** A short line for the page's status ("API key required"), while the key is the problem. */
  readonly problem: string | undefined;
}

/**
 * A password input (show/hide, clear) for the gateway's API key, kept in `store` (sessionStorage).
 * A new key applies on Enter or when the field loses focus; `onChange` then refreshes the page.
 * The key itself is never written anywhere but the input and the store.
 */
export function mountApiKeyField(after: Element, store: ApiKeyStore, onChange: () => void): ApiKeyField {
  const input = h("input", {
    id: "api-key-input",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "none",
    "aria-describedby": "api-key-status",
  });
  input.value = store.key ?? "";
  const toggle = h("button", { id: "api-key-toggle", type: "button", class: "small", "aria-pressed": "false", "aria-controls": "api-key-input" }, "show");
  const clear = h("button", { id: "api-key-clear", type: "button", class: "small", title: "forget the key (this tab)" }, "clear");
  const status = h("span", { id: "api-key-status", class: "api-key-status", role: "status" });
  const box = h(
    "div",
    { id: "api-key", class: "api-key", title: "sent as 'Authorization: Bearer <key>' on every call; kept in this tab's session storage only" },
    h("label", { for: "api-key-input" }, "API key"),
    input,
    toggle,
    clear,
    status,
  );
  after.after(box);

  let problem: string | undefined;
  const show = (text: string, tone: "ok" | "bad" | "", detail = ""): void => {
    status.textContent = text;
    status.dataset["tone"] = tone;
    status.title = detail;
  };

  toggle.addEventListener("click", () => {
    const hidden = input.type === "password";
    input.type = hidden ? "text" : "password";
    toggle.textContent = hidden ? "hide" : "show";
    toggle.setAttribute("aria-pressed", String(hidden));
  });
  input.addEventListener("change", () => {
    const invalid = store.set(input.value);
    if (invalid !== undefined) return show("invalid", "bad", invalid);
    input.value = store.key ?? "";
    show(store.key === undefined ? "" : "checking…", "");
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") input.dispatchEvent(new Event("change"));
  });
  clear.addEventListener("click", () => {
    input.value = "";
    store.clear();
    show("", "");
  });
  store.onChange(() => onChange());

  return {
    get problem() {
      return problem;
    },
    report(err) {
      if (err === undefined) {
        problem = undefined;
        return show(store.key === undefined ? "" : "accepted", store.key === undefined ? "" : "ok");
      }
      const p = authProblem(err, store.key !== undefined);
      problem = p && `API key ${p.status}`;
      if (p) show(p.status, "bad", p.message);
    },
  };
}
