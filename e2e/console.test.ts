import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { launchBrowser, type Browser } from "./harness/browser.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor } from "./harness/clients.ts";
import { rawGet } from "./harness/attacks.ts";
import { REPO_ROOT } from "./harness/service-process.ts";

const ARTIFACTS = resolve(REPO_ROOT, "e2e/artifacts");
const TEXTS = [
  "A cat sleeps on the warm windowsill.",
  "A kitten naps in the afternoon sun.",
  "Quarterly revenue grew by twelve percent.",
  "The stock market closed higher today.",
];

/** A page from another origin (its own port) that calls the gateway with fetch + Connect JSON. */
function crossOriginPage(gateway: string, model: string): string {
  return `<!doctype html><meta charset="utf-8"><title>other origin</title><pre id="result">pending</pre>
<script type="module">
  const out = document.getElementById("result");
  try {
    const headers = { "content-type": "application/json", "connect-protocol-version": "1",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };
    const list = await fetch(${JSON.stringify(gateway)} + "/shoal.v1.ModelService/ListModels", { method: "POST", headers, body: "{}" });
    const models = (await list.json()).models.map((m) => m.id);
    const embed = await fetch(${JSON.stringify(gateway)} + "/shoal.v1.InferenceService/Embed", {
      method: "POST", headers, body: JSON.stringify({ model: ${JSON.stringify(model)}, inputs: ["from another origin"] }) });
    const dims = (await embed.json()).embeddings[0].values.length;
    out.textContent = JSON.stringify({ models, dims, totalMs: embed.headers.get("shoal-total-ms") });
  } catch (err) {
    out.textContent = "error: " + err;
  }
</script>`;
}

describe("web console and browser access (real Chromium, real stack)", () => {
  let cluster: TestCluster;
  let base: string;
  let model: string;
  let dims: number;
  let browser: Browser | undefined;
  let other: http.Server | undefined;
  before(async () => {
    browser = await launchBrowser();
    cluster = await startCluster({ gatewayEnv: { SHOAL_CORS_ORIGINS: "*" } });
    base = cluster.urls[0]!;
    model = cluster.modelIds[0]!;
    dims = (await clientsFor(base, "connect").models.getModel({ id: model })).model!.dimensions;
  });
  after(async () => {
    await browser?.close();
    other?.closeAllConnections();
    other?.close();
    await cluster?.stop();
  });

  test("/console/ lists the models, runs Embed over Connect-Web and draws the n x n similarity matrix", async () => {
    const page: Page = await browser!.context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => (m.type() === "error" ? errors.push(m.text()) : undefined));
    const res = await page.goto(`${base}/console/`);
    assert.equal(res?.status(), 200);
    await page.locator(`#models-table tbody tr[data-model="${model}"]`).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('[data-field="gateway"] .value').textContent(), "reachable");
    assert.equal(await page.locator("#embed-model").inputValue(), model);
    // Cluster at a glance (ClusterService.GetCluster): the worker, its memory bar, the pool's lanes.
    // This cluster's worker (ids start with its pool): other tests share the broker's status topic,
    // and a gateway without cluster keys lists what they published there until it expires.
    const ownWorker = `#workers-table tbody tr[data-worker^="${cluster.pool}"]`;
    await page.locator(ownWorker).first().waitFor({ timeout: 15_000 });
    assert.match((await page.locator(`${ownWorker} td`).first().textContent()) ?? "", new RegExp(cluster.pool));
    assert.equal(await page.locator(`${ownWorker} .mem .bar`).count(), 1);
    assert.equal(await page.locator(`#lanes-table tr[data-pool="${cluster.pool}"] td.lag`).count(), 2, "interactive and batch lag");
    assert.equal(await page.locator("#cluster-unavailable").count(), 0);
    assert.equal(await page.locator('[data-field="workers"] .value').textContent(), "1");
    // No rerank or classify models here: their panels say so instead of offering an empty picker.
    assert.equal(await page.locator("#rerank-empty").isVisible(), true);
    assert.equal(await page.locator("#classify-empty").isVisible(), true);

    await page.locator("#embed-texts").fill(TEXTS.join("\n"));
    await page.locator("#embed-button").click();
    await page
      .locator("#matrix td.cell")
      .nth(TEXTS.length ** 2 - 1)
      .waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#matrix td.cell").count(), TEXTS.length ** 2);
    assert.equal(await page.locator("#matrix").getAttribute("data-size"), String(TEXTS.length));
    assert.equal(await page.locator("#embed-dims").textContent(), String(dims));
    const diagonal = await page.locator("#matrix tbody tr").evaluateAll((rows) => rows.map((r, i) => r.querySelectorAll("td")[i]?.textContent));
    assert.deepEqual(
      diagonal,
      TEXTS.map(() => "1.00"),
    );
    const colours = await page.locator("#matrix td.cell").evaluateAll((cells) => new Set(cells.map((c) => c.getAttribute("style"))).size);
    assert.ok(colours > 1, "cells are coloured by similarity");
    // The gateway's timing headers reached the page (same origin) and the glance panel.
    assert.notEqual(await page.locator('[data-field="last-embed"] .value').textContent(), "—");
    assert.match((await page.locator('[data-field="worker"] .value').textContent()) ?? "", new RegExp(cluster.pool));

    // The model's row shows where it is loaded (it served the Embed above) and its cold start.
    const replicas = page.locator(`#models-table tbody tr[data-model="${model}"] td.replicas`);
    await replicas.filter({ hasText: "resident" }).waitFor({ timeout: 15_000 });

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "console.png"), fullPage: true });
    assert.deepEqual(errors, []);
    await page.close();
  });

  test("console files: redirect to /console/, content types, long cache for hashed assets, 404", async () => {
    const redirect = await fetch(`${base}/console`, { redirect: "manual" });
    assert.equal(redirect.status, 301);
    assert.equal(redirect.headers.get("location"), "/console/");
    const index = await fetch(`${base}/console/`);
    assert.match(index.headers.get("content-type") ?? "", /^text\/html/);
    const html = await index.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    assert.ok(script, "index.html references a hashed script");
    const js = await fetch(`${base}${script}`);
    assert.match(js.headers.get("content-type") ?? "", /^text\/javascript/);
    assert.match(js.headers.get("cache-control") ?? "", /immutable/);
    assert.equal((await fetch(`${base}/console/nope.js`)).status, 404);
  });

  test("console paths leaving its directory, sent raw over HTTP/1.1 and HTTP/2, get the guard's own 403", async () => {
    // Raw targets: fetch would normalise `/../` and `%2e%2e/` away before sending, and never reach the guard.
    for (const version of ["1.1", "2"] as const) {
      for (const target of [
        "/console/../../package.json",
        "/console/%2e%2e/%2e%2e/package.json",
        "/console/..%2f..%2fpackage.json",
        "/console/%2E%2E%2F%2E%2E%2Fpackage.json",
      ]) {
        assert.deepEqual(
          await rawGet(base, target, version),
          { status: 403, body: "refused: the path leaves the console directory\n" },
          `HTTP/${version} ${target}`,
        );
      }
      // A `..` that stays inside is served (built console) or answered as a missing file: not the guard.
      assert.notEqual((await rawGet(base, "/console/assets/../index.html", version)).status, 403, `HTTP/${version}: inside the root`);
    }
  });

  test("CORS preflight from another origin gets the Access-Control-* headers (Connect route and /v1/embeddings)", async () => {
    const origin = "http://127.0.0.1:1";
    const preflight = await fetch(`${base}/shoal.v1.ModelService/ListModels`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,connect-protocol-version,traceparent" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    assert.match(preflight.headers.get("access-control-allow-methods") ?? "", /POST/);
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").split(/,\s*/);
    for (const h of ["content-type", "connect-protocol-version", "connect-timeout-ms", "traceparent", "tracestate", "authorization", "x-grpc-web"]) {
      assert.ok(allowed.includes(h), `${h} allowed`);
    }
    assert.ok(Number(preflight.headers.get("access-control-max-age")) > 0);

    const openai = await fetch(`${base}/v1/embeddings`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type,x-stainless-os" },
    });
    assert.equal(openai.status, 204);
    assert.match(openai.headers.get("access-control-allow-headers") ?? "", /x-stainless-os/);

    const call = await fetch(`${base}/shoal.v1.InferenceService/Embed`, {
      method: "POST",
      headers: { origin, "content-type": "application/json" },
      body: JSON.stringify({ model, inputs: ["cors"] }),
    });
    assert.equal(call.status, 200);
    assert.equal(call.headers.get("access-control-allow-origin"), "*");
    const exposed = (call.headers.get("access-control-expose-headers") ?? "").split(/,\s*/);
    for (const h of ["shoal-queue-ms", "shoal-tokenize-ms", "shoal-inference-ms", "shoal-total-ms", "grpc-status", "grpc-message", "retry-after-ms"]) {
      assert.ok(exposed.includes(h), `${h} exposed`);
    }
  });

  test("a page served from a different local origin calls ListModels and Embed with fetch + Connect JSON", async () => {
    other = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(crossOriginPage(base, model));
    });
    await new Promise<void>((r) => other!.listen(0, "127.0.0.1", r));
    const pageUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}/`;
    assert.notEqual(new URL(pageUrl).origin, new URL(base).origin);
    const page = await browser!.context.newPage();
    await page.goto(pageUrl);
    await page.locator("#result").filter({ hasNotText: "pending" }).waitFor({ timeout: 20_000 });
    const text = (await page.locator("#result").textContent()) ?? "";
    assert.doesNotMatch(text, /^error/, text);
    const result = JSON.parse(text) as { models: string[]; dims: number; totalMs: string | null };
    assert.deepEqual(result.models, [model]);
    assert.equal(result.dims, dims);
    assert.ok(Number(result.totalMs) > 0, "the exposed shoal-total-ms header is readable cross-origin");
    await page.close();
  });
});

describe("console try-it panels for Rerank and Classify (real Chromium, real stack)", () => {
  const EMBED = "shoal-tiny-embed";
  const RERANK = "shoal-tiny-rerank";
  const CLASSIFY = "shoal-tiny-classify";
  let cluster: TestCluster;
  let browser: Browser | undefined;
  before(async () => {
    browser = await launchBrowser();
    cluster = await startCluster({ presets: ["tiny", "tiny-rerank", "tiny-classify"], workerEnv: { SHOAL_STATUS_INTERVAL_MS: "500" } });
  });
  after(async () => {
    await browser?.close();
    await cluster?.stop();
  });

  test("pickers offer only the models of their task; Rerank ranks the documents, Classify draws label bars", async () => {
    const page: Page = await browser!.context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => (m.type() === "error" ? errors.push(m.text()) : undefined));
    await page.goto(`${cluster.urls[0]!}/console/`);
    await page.locator(`#models-table tbody tr[data-model="${CLASSIFY}"]`).waitFor({ timeout: 15_000 });
    const options = (id: string): Promise<string[]> => page.locator(`#${id} option`).evaluateAll((os) => os.map((o) => o.getAttribute("value") ?? ""));
    assert.deepEqual(await options("embed-model"), [EMBED]);
    assert.deepEqual(await options("rerank-model"), [RERANK]);
    assert.deepEqual(await options("classify-model"), [CLASSIFY]);
    assert.equal(await page.locator("#rerank-empty").isVisible(), false);

    const documents = ["A cat sleeps on the warm windowsill.", "Quarterly revenue grew by twelve percent.", "Kittens nap in the afternoon sun."];
    await page.locator("#rerank-query").fill("Where do cats like to nap?");
    await page.locator("#rerank-docs").fill(documents.join("\n"));
    await page.locator("#rerank-button").click();
    await page
      .locator("#rerank-results li")
      .nth(documents.length - 1)
      .waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#rerank-error").textContent(), "");
    const ranked = await page.locator("#rerank-results li").evaluateAll((items) =>
      items.map((li) => ({
        index: Number(li.getAttribute("data-index")),
        score: Number(li.getAttribute("data-score")),
        text: li.querySelector(".doc")?.textContent ?? "",
      })),
    );
    assert.deepEqual(ranked.map((r) => r.index).sort(), [0, 1, 2], "every document once");
    for (let i = 1; i < ranked.length; i++) assert.ok(ranked[i - 1]!.score >= ranked[i]!.score, "highest score first");
    for (const r of ranked) {
      assert.ok(r.score > 0 && r.score < 1, "sigmoid scores");
      assert.equal(r.text, documents[r.index], "the document's own text");
    }
    assert.equal(await page.locator("#rerank-results li .score-bar .fill").count(), documents.length);

    const texts = ["I love this, it works perfectly!", "Terrible service, I want a refund."];
    await page.locator("#classify-texts").fill(texts.join("\n"));
    await page.locator("#classify-button").click();
    await page
      .locator("#classify-results .classification")
      .nth(texts.length - 1)
      .waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#classify-error").textContent(), "");
    for (let i = 0; i < texts.length; i++) {
      const rows = page.locator(`#classify-results .classification[data-index="${i}"] .label-row`);
      const labels = await rows.evaluateAll((rs) => rs.map((r) => ({ label: r.getAttribute("data-label"), score: Number(r.getAttribute("data-score")) })));
      assert.deepEqual(labels.map((l) => l.label).sort(), ["negative", "neutral", "positive"]);
      for (let j = 1; j < labels.length; j++) assert.ok(labels[j - 1]!.score >= labels[j]!.score, "highest score first");
      assert.ok(Math.abs(labels.reduce((sum, l) => sum + l.score, 0) - 1) < 1e-3, "softmax sums to 1");
    }
    assert.match((await page.locator('[data-field="last-embed"] .hint').textContent()) ?? "", /^Classify/);

    // Both models are now resident on the worker: chips in the workers table, replicas in the models table.
    await page.locator(`#workers-table .chip[data-model="${RERANK}"][data-state="resident"]`).waitFor({ timeout: 15_000 });
    await page.locator(`#workers-table .chip[data-model="${CLASSIFY}"][data-state="resident"]`).waitFor({ timeout: 15_000 });
    await page.locator(`#models-table tbody tr[data-model="${RERANK}"] td.replicas`).filter({ hasText: "resident" }).waitFor({ timeout: 15_000 });

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "console-scores.png"), fullPage: true });
    assert.deepEqual(errors, []);
    await page.close();
  });
});

describe("console against a gateway that requires API keys (real Chromium, real stack)", () => {
  const KEY = `sk-console-${randomBytes(12).toString("hex")}`;
  const model = "shoal-tiny-embed";
  let cluster: TestCluster;
  let browser: Browser | undefined;
  before(async () => {
    browser = await launchBrowser();
    // The key may use the one model served; the console must send it on every call.
    cluster = await startCluster({ gatewayEnv: { SHOAL_API_KEYS: `console=${KEY};models=${model}` } });
  });
  after(async () => {
    await browser?.close();
    await cluster?.stop();
  });

  test("without a key ListModels fails visibly; with the key (password field, show/hide, sessionStorage) the models appear", async () => {
    const page: Page = await browser!.context.newPage();
    const pageErrors: string[] = [];
    const consoleLines: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("console", (m) => consoleLines.push(m.text()));
    await page.goto(`${cluster.urls[0]!}/console/`);

    // No key: Unauthenticated, said in words, and no models.
    const status = page.locator("#api-key-status");
    await status.filter({ hasText: "required" }).waitFor({ timeout: 15_000 });
    assert.equal(await status.getAttribute("data-tone"), "bad");
    // The key field updates as ListModels fails; the status line and the glance only once the
    // refresh's other call (GetCluster) is back too, so wait for them rather than read at once.
    const statusText = page.locator("#status-text");
    await statusText.filter({ hasText: "API key required" }).waitFor({ timeout: 15_000 });
    assert.equal(await statusText.textContent(), "API key required");
    const gatewayHint = page.locator('[data-field="gateway"] .hint');
    await gatewayHint.filter({ hasText: /requires an API key/ }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator("#models-table tbody tr").count(), 0);

    const input = page.locator("#api-key-input");
    assert.equal(await input.getAttribute("type"), "password");
    // A wrong key is rejected (and the gateway's reason is shown, never the key).
    await input.fill("sk-console-not-the-key-0000");
    await input.press("Enter");
    await status.filter({ hasText: "rejected" }).waitFor({ timeout: 15_000 });
    await gatewayHint.filter({ hasText: /did not accept this API key \(API key not recognised\)/ }).waitFor({ timeout: 15_000 });

    // The key: the models list appears, the field says so.
    await input.fill(KEY);
    await input.press("Enter");
    await page.locator(`#models-table tbody tr[data-model="${model}"]`).waitFor({ timeout: 15_000 });
    await status.filter({ hasText: "accepted" }).waitFor({ timeout: 15_000 });
    await page
      .locator('[data-field="gateway"] .value')
      .filter({ hasText: /^reachable$/ })
      .waitFor({ timeout: 15_000 });
    await page.locator("#api-key-toggle").click();
    assert.equal(await input.getAttribute("type"), "text");
    assert.equal(await page.locator("#api-key-toggle").textContent(), "hide");
    await page.locator("#api-key-toggle").click();
    assert.equal(await input.getAttribute("type"), "password");
    // (Page scripts as strings: the e2e tsconfig has no DOM types.)
    const stored = await page.evaluate(`({ session: sessionStorage.getItem("shoal.console.apiKey"), local: localStorage.length })`);
    assert.deepEqual(stored, { session: KEY, local: 0 }, "sessionStorage only");

    // Embed carries the key too; a model outside the key's list reads as PermissionDenied for that model.
    await page.locator("#embed-texts").fill("with a key\nstill with a key");
    await page.locator("#embed-button").click();
    await page.locator("#matrix").waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#embed-error").textContent(), "");
    // A picker offers only the key's models (ListModels is filtered): add another one by hand and
    // click in the same script, before a refresh can rebuild the picker.
    await page.evaluate(`{
      const select = document.getElementById("embed-model");
      select.add(new Option("shoal-not-for-this-key", "shoal-not-for-this-key"));
      select.value = "shoal-not-for-this-key";
      document.getElementById("embed-button").click();
    }`);
    await page.locator("#embed-error").filter({ hasText: "PermissionDenied" }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator("#embed-error").textContent(), "PermissionDenied: this key may not use model 'shoal-not-for-this-key'.");

    // A reload keeps the key (same tab); clearing it goes back to "required".
    await page.reload();
    await page.locator(`#models-table tbody tr[data-model="${model}"]`).waitFor({ timeout: 15_000 });
    await page.locator("#api-key-clear").click();
    await status.filter({ hasText: "required" }).waitFor({ timeout: 15_000 });
    assert.equal(await page.evaluate(`sessionStorage.getItem("shoal.console.apiKey")`), null);
    assert.equal(await page.locator("#models-table tbody tr").count(), 0, "the key's models are no longer shown");

    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "console-api-key.png"), fullPage: true });
    assert.deepEqual(pageErrors, []);
    assert.ok(!consoleLines.some((l) => l.includes(KEY)), "the key never reaches the browser console");
    assert.ok(!JSON.stringify(cluster.gateways[0]!.logs).includes(KEY), "nor the gateway's logs");
    await page.close();
  });
});
