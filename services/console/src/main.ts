import "./style.css";
import { ConnectError } from "@connectrpc/connect";
import { Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { EmbedResponse } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { gatewayUrl, ShoalApi, type Timed } from "./api.ts";
import { byId, h } from "./dom.ts";
import { renderGlance, type ClusterSnapshot } from "./glance.ts";
import { formatMs, LatencyWindow } from "./latency.ts";
import { colorFloor, cosineMatrix, similarityColor } from "./similarity.ts";

const REFRESH_MS = 5_000;
const MAX_TEXTS = 32;

const api = new ShoalApi(gatewayUrl(window.location));
const snapshot: ClusterSnapshot = {
  reachable: undefined,
  lastRefresh: undefined,
  listModelsMs: undefined,
  modelCount: undefined,
  embedRoundTrips: new LatencyWindow(50),
  lastEmbed: undefined,
  error: undefined,
};

const glance = byId("glance");
const modelsBody = byId<HTMLTableElement>("models-table").tBodies[0]!;
const modelSelect = byId<HTMLSelectElement>("embed-model");
const form = byId<HTMLFormElement>("embed-form");
const button = byId<HTMLButtonElement>("embed-button");
const errorBox = byId("embed-error");
const summary = byId("embed-summary");
const matrixWrap = byId("matrix-wrap");

byId("gateway-url").textContent = api.baseUrl;

function messageOf(err: unknown): string {
  return ConnectError.from(err).rawMessage || String(err);
}

function renderStatus(): void {
  const dot = byId("status-dot");
  dot.dataset["tone"] = snapshot.reachable === undefined ? "" : snapshot.reachable ? "ok" : "bad";
  byId("status-text").textContent =
    snapshot.reachable === undefined ? "connecting…" : snapshot.reachable ? `live · every ${REFRESH_MS / 1_000} s` : "gateway unreachable";
}

function renderModels(models: readonly Model[]): void {
  byId("models-count").textContent = `(${models.length})`;
  modelsBody.replaceChildren(
    ...models.map((m) =>
      h(
        "tr",
        { "data-model": m.id },
        h("td", {}, h("code", {}, m.id)),
        h("td", {}, (Task[m.task] ?? "unknown").toLowerCase()),
        h("td", { class: "num" }, m.dimensions),
        h("td", { class: "num" }, m.maxSequenceLength),
        h("td", {}, m.pool),
        h("td", {}, m.normalizeDefault ? "yes" : "no"),
      ),
    ),
  );
  const embedders = models.filter((m) => m.task === Task.EMBED);
  const current = modelSelect.value;
  const ids = embedders.map((m) => m.id);
  const shown = [...modelSelect.options].map((o) => o.value);
  if (ids.join("\n") !== shown.join("\n")) {
    modelSelect.replaceChildren(...embedders.map((m) => h("option", { value: m.id }, `${m.id} (${m.dimensions}d)`)));
    if (ids.includes(current)) modelSelect.value = current;
  }
}

async function refresh(): Promise<void> {
  try {
    const res = await api.listModels();
    snapshot.reachable = true;
    snapshot.error = undefined;
    snapshot.listModelsMs = res.roundTripMs;
    snapshot.modelCount = res.value.length;
    renderModels(res.value);
  } catch (err) {
    snapshot.reachable = false;
    snapshot.error = messageOf(err);
  }
  snapshot.lastRefresh = new Date();
  renderStatus();
  renderGlance(glance, snapshot);
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
    h("thead", {}, h("tr", {}, h("th", { class: "corner", title: `colour: palest at ${floor.toFixed(2)} (lowest pair), deepest at 1` }, "cosine"), ...texts.map((t, i) => h("th", { title: t, scope: "col" }, `#${i + 1}`)))),
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
  const texts = byId<HTMLTextAreaElement>("embed-texts")
    .value.split("\n")
    .map((t) => t.trim())
    .filter((t) => t !== "");
  errorBox.textContent = "";
  if (texts.length === 0) return void (errorBox.textContent = "enter at least one text");
  if (texts.length > MAX_TEXTS) return void (errorBox.textContent = `at most ${MAX_TEXTS} texts here`);
  button.disabled = true;
  button.textContent = "Embedding…";
  api
    .embed(modelSelect.value, texts, byId<HTMLInputElement>("embed-normalize").checked)
    .then((res) => {
      snapshot.embedRoundTrips.add(res.roundTripMs);
      snapshot.lastEmbed = res.server;
      renderMatrix(texts, res);
      renderGlance(glance, snapshot);
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
void refresh();
setInterval(() => {
  if (!document.hidden) void refresh();
}, REFRESH_MS);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) void refresh();
});
