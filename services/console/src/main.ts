import "./style.css";
import { Code, ConnectError } from "@connectrpc/connect";
import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { EmbedResponse } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { gatewayUrl, ShoalApi, type Timed } from "./api.ts";
import { ApiKeyStore, authProblem, type KeyStorage } from "./api-key.ts";
import { mountApiKeyField } from "./api-key-field.ts";
import { renderCluster } from "./cluster.ts";
import { byId, fillSelect, h, linesOf } from "./dom.ts";
import { renderGlance, type ClusterSnapshot, type InferenceMethod } from "./glance.ts";
import { formatMs, LatencyWindow } from "./latency.ts";
import { renderModelRows } from "./models-table.ts";
import { mountRegistryPanel } from "./registry-panel.ts";
import { colorFloor, cosineMatrix, similarityColor } from "./similarity.ts";
import { mountScorePanels } from "./try-scores.ts";

/** ListModels and GetCluster, while the page is visible. */
const REFRESH_MS = 2_000;
/** GetCluster after the gateway said it has no ClusterService (an older gateway): rarely. */
const CLUSTER_UNIMPLEMENTED_RETRY_MS = 30_000;
const MAX_TEXTS = 32;

/** This tab's sessionStorage; undefined where the browser refuses it (the key then lasts as long as the page). */
function sessionStore(): KeyStorage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined;
  }
}

const apiKey = new ApiKeyStore(sessionStore());
const api = new ShoalApi(gatewayUrl(window.location), { apiKey: () => apiKey.key });
const snapshot: ClusterSnapshot = {
  reachable: undefined,
  lastRefresh: undefined,
  listModelsMs: undefined,
  modelCount: undefined,
  embedRoundTrips: new LatencyWindow(50),
  lastCall: undefined,
  error: undefined,
  cluster: undefined,
  clusterError: undefined,
  clusterAt: undefined,
};

const glance = byId("glance");
const clusterBox = h("div", { id: "cluster", class: "cluster" });
glance.after(clusterBox);
const modelsTable = byId<HTMLTableElement>("models-table");
const modelSelect = byId<HTMLSelectElement>("embed-model");
const form = byId<HTMLFormElement>("embed-form");
const button = byId<HTMLButtonElement>("embed-button");
const errorBox = byId("embed-error");
const summary = byId("embed-summary");
const matrixWrap = byId("matrix-wrap");

byId("gateway-url").textContent = api.baseUrl;
// A new key refreshes at once (and the next Embed, Rerank or Classify carries it).
const keyField = mountApiKeyField(byId("gateway-url").closest(".gateway") ?? byId("gateway-url"), apiKey, () => void refresh());

/** An error as the page shows it: a missing, wrong or insufficient API key in words, else Connect's message. */
function messageOf(err: unknown): string {
  return authProblem(err, apiKey.key !== undefined)?.message ?? (ConnectError.from(err).rawMessage || String(err));
}

function recordCall(method: InferenceMethod, res: Timed<unknown>): void {
  snapshot.lastCall = { method, server: res.server };
  renderGlance(glance, snapshot);
}

const scorePanels = mountScorePanels(form.closest("section") ?? form, api, recordCall, messageOf);
// AddModel and RemoveModel answer once this gateway has the change: refresh at once to show it.
const registry = mountRegistryPanel(modelsTable, api, () => void refresh());

function renderStatus(): void {
  const dot = byId("status-dot");
  dot.dataset["tone"] = snapshot.reachable === undefined ? "" : snapshot.reachable ? "ok" : "bad";
  byId("status-text").textContent =
    snapshot.reachable === undefined
      ? "connecting…"
      : snapshot.reachable
        ? `live · every ${REFRESH_MS / 1_000} s`
        : (keyField.problem ?? "gateway unreachable");
}

function renderModels(models: readonly Model[]): void {
  byId("models-count").textContent = `(${models.length})`;
  renderModelRows(modelsTable, models, registry.removing);
  fillSelect(
    modelSelect,
    models.filter((m) => m.task === Task.EMBED).map((m) => ({ value: m.id, label: `${m.id} (${m.dimensions}d)` })),
  );
  scorePanels.setModels(models);
  registry.setModels(models);
}

let clusterRetryAt = 0;

/** GetCluster; a failure is shown as "cluster state unavailable" and never breaks the page. */
async function refreshCluster(): Promise<void> {
  if (Date.now() < clusterRetryAt) return;
  try {
    const res = await api.getCluster();
    snapshot.cluster = res.value;
    snapshot.clusterAt = new Date();
    snapshot.clusterError = undefined;
  } catch (err) {
    const e = ConnectError.from(err);
    snapshot.clusterError = e.rawMessage || String(err);
    // An older gateway without ClusterService: ask again now and then, not every tick.
    if (e.code === Code.Unimplemented) clusterRetryAt = Date.now() + CLUSTER_UNIMPLEMENTED_RETRY_MS;
  }
  renderCluster(clusterBox, snapshot);
}

let refreshing = false;
/** A refresh was asked for while one was in flight (a new API key): run one more when it ends. */
let refreshAgain = false;

async function refresh(): Promise<void> {
  // A slow gateway must not pile up overlapping refreshes.
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = true;
  try {
    await Promise.all([refreshModels(), refreshCluster()]);
  } finally {
    refreshing = false;
  }
  renderStatus();
  renderGlance(glance, snapshot);
  if (refreshAgain) {
    refreshAgain = false;
    await refresh();
  }
}

async function refreshModels(): Promise<void> {
  // An answer to a call made with another key (changed while it was in flight) says nothing of this
  // one: the refresh that the change asked for reports it.
  const sentWith = apiKey.key;
  try {
    const res = await api.listModels();
    if (apiKey.key !== sentWith) return;
    snapshot.reachable = true;
    snapshot.error = undefined;
    snapshot.listModelsMs = res.roundTripMs;
    snapshot.modelCount = res.value.length;
    renderModels(res.value);
    keyField.report(undefined);
  } catch (err) {
    if (apiKey.key !== sentWith) return;
    snapshot.reachable = false;
    snapshot.error = messageOf(err);
    keyField.report(err);
    // Without a (valid) key, the last key's models are not this page's to show any more.
    if (authProblem(err, apiKey.key !== undefined)) {
      snapshot.modelCount = undefined;
      renderModels([]);
    }
  }
  snapshot.lastRefresh = new Date();
}

function renderMatrix(texts: readonly string[], res: Timed<EmbedResponse>): void {
  const vectors = res.value.embeddings.map((e) => e.values);
  const dims = vectors[0]?.length ?? 0;
  const tokens = res.value.usage?.totalTokens ?? 0;
  const s = res.server;
  summary.replaceChildren(
    h("strong", { id: "embed-count" }, vectors.length),
    " vectors × ",
    h("strong", { id: "embed-dims" }, dims),
    ` dimensions · ${tokens} tokens · round trip ${formatMs(res.roundTripMs)}`,
    s.totalMs === undefined
      ? ""
      : ` · gateway ${formatMs(s.totalMs)} (queue ${formatMs(s.queueMs)}, tokenize ${formatMs(s.tokenizeMs)}, inference ${formatMs(s.inferenceMs)})`,
  );
  const sims = cosineMatrix(vectors);
  const floor = colorFloor(sims);
  const short = (t: string): string => (t.length > 28 ? `${t.slice(0, 27)}…` : t);
  const table = h(
    "table",
    { id: "matrix", class: "matrix", "data-size": vectors.length },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { class: "corner", title: `colour: palest at ${floor.toFixed(2)} (lowest pair), deepest at 1` }, "cosine"),
        ...texts.map((t, i) => h("th", { title: t, scope: "col" }, `#${i + 1}`)),
      ),
    ),
    h(
      "tbody",
      {},
      ...sims.map((row, i) =>
        h(
          "tr",
          {},
          h("th", { scope: "row", title: texts[i] }, h("span", { class: "idx" }, `#${i + 1}`), " ", short(texts[i] ?? "")),
          ...row.map((sim, j) => {
            const { background, color } = similarityColor(sim, floor);
            const cell = h("td", { class: "cell", title: `#${i + 1} · #${j + 1}: ${sim.toFixed(4)}` }, sim.toFixed(2));
            cell.style.background = background;
            cell.style.color = color;
            return cell;
          }),
        ),
      ),
    ),
  );
  matrixWrap.replaceChildren(table);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const texts = linesOf(byId<HTMLTextAreaElement>("embed-texts").value);
  errorBox.textContent = "";
  if (texts.length === 0) {
    errorBox.textContent = "enter at least one text";
    return;
  }
  if (texts.length > MAX_TEXTS) {
    errorBox.textContent = `at most ${MAX_TEXTS} texts here`;
    return;
  }
  button.disabled = true;
  button.textContent = "Embedding…";
  api
    .embed(modelSelect.value, texts, byId<HTMLInputElement>("embed-normalize").checked)
    .then((res) => {
      snapshot.embedRoundTrips.add(res.roundTripMs);
      renderMatrix(texts, res);
      recordCall("Embed", res);
    })
    .catch((err: unknown) => {
      errorBox.textContent = messageOf(err);
    })
    .finally(() => {
      button.disabled = false;
      button.textContent = "Embed";
    });
});

renderGlance(glance, snapshot);
renderCluster(clusterBox, snapshot);
renderModelRows(modelsTable, []);
void refresh();
setInterval(() => {
  if (!document.hidden) void refresh();
}, REFRESH_MS);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) void refresh();
});
