import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import type { BrowserContext, Page } from "playwright-core";
import { launchBrowser } from "./harness/browser.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf } from "./harness/clients.ts";
import { REPO_ROOT, ServiceProcess } from "./harness/service-process.ts";
import { tinyVariant } from "./harness/tiny-variant.ts";

const ARTIFACTS = resolve(REPO_ROOT, "e2e/artifacts");
const TEXTS = ["A cat sleeps on the warm windowsill.", "Quarterly revenue grew by twelve percent.", "The stock market closed higher today."];
/** The id the form adds the copied tiny model under. */
const ADDED = "console-tiny";

/**
 * A page that records what a user would see go wrong: uncaught errors and console errors. A refused
 * Connect call is an HTTP 4xx, which Chromium logs as "Failed to load resource": expected here.
 */
async function openConsole(browser: { context: BrowserContext }, url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => (m.type() === "error" && !m.text().startsWith("Failed to load resource") ? errors.push(m.text()) : undefined));
  page.on("dialog", (d) => void d.accept());
  assert.equal((await page.goto(`${url}/console/`))?.status(), 200);
  return { page, errors };
}

const row = (id: string): string => `#models-table tbody tr[data-model="${id}"]`;

describe("console: the model registry listed, a model added and refused through the form (real Chromium, real stack)", () => {
  let cluster: TestCluster;
  let browser: Awaited<ReturnType<typeof launchBrowser>> | undefined;
  let clients: ReturnType<typeof clientsFor>;
  let admin: Client<typeof ModelAdminService>;
  let seeded: Model;
  let addedDir: string;
  let page: Page;
  let errors: string[];
  const extra: ServiceProcess[] = [];

  before(async () => {
    browser = await launchBrowser();
    cluster = await startCluster({ presets: ["tiny"], workers: 1, workerEnv: { SHOAL_STATUS_INTERVAL_MS: "500" } });
    clients = clientsFor(cluster.urls[0]!, "connect");
    admin = createClient(ModelAdminService, createConnectTransport({ baseUrl: cluster.urls[0]!, httpVersion: "1.1" }));
    seeded = (await clients.models.getModel({ id: cluster.modelIds[0]! })).model!;
    // The cluster's generated tiny encoder, copied to a folder of its own (a Hub-layout folder a user would name).
    addedDir = await tinyVariant("console-copy", {});
    ({ page, errors } = await openConsole(browser, cluster.urls[0]!));
  });
  after(async () => {
    await page?.close();
    await Promise.all(extra.map((p) => p.stop("SIGTERM")));
    await browser?.close();
    await cluster?.stop();
  });

  test("the list shows a seeded model's source, short revision and aliases; the form's pool defaults to the models' pool", async () => {
    assert.notEqual(seeded.source, "", "a catalog model seeded into the registry names its folder");
    assert.match(seeded.revision, /^[0-9a-f]{40}$/);
    await page.locator(row(seeded.id)).waitFor({ timeout: 15_000 });
    const headers = await page.locator("#models-table thead th").allTextContents();
    for (const h of ["id", "task", "source", "revision", "pool"]) assert.ok(headers.includes(h), `column ${h}: ${headers.join(", ")}`);
    assert.equal(await page.locator(`${row(seeded.id)} td.source`).textContent(), seeded.source);
    assert.equal(await page.locator(`${row(seeded.id)} td.source`).getAttribute("title"), seeded.source, "the whole path on hover");
    assert.equal(await page.locator(`${row(seeded.id)} td.revision`).textContent(), seeded.revision.slice(0, 7));
    assert.equal(await page.locator(`${row(seeded.id)} td.revision`).getAttribute("title"), seeded.revision);
    assert.equal(await page.locator("#add-model-pool").inputValue(), cluster.pool);

    // An alias set elsewhere (the CLI, another console) shows under the model it points at.
    await admin.setAlias({ alias: "console-default", target: seeded.id });
    await page.locator(`${row(seeded.id)} .alias[data-alias="console-default"]`).waitFor({ timeout: 15_000 });
    await admin.removeAlias({ alias: "console-default" });
    await page.locator(`${row(seeded.id)} .alias`).waitFor({ state: "detached", timeout: 15_000 });
  });

  test("adding a folder through the form shows progress, lists the model and serves an Embed from the console", async () => {
    // Whether the progress line showed at all (AddModel of a local folder may take well under a second).
    await page.evaluate(`{
      window.sawProgress = false;
      const progress = document.getElementById("add-model-progress");
      new MutationObserver(() => { if (!progress.hidden && document.getElementById("add-model-button").disabled) window.sawProgress = true; })
        .observe(progress, { attributes: true, attributeFilter: ["hidden"] });
    }`);
    await page.locator("#add-model-source").fill(addedDir);
    await page.locator("#add-model-id").fill(ADDED);
    await page.locator("#add-model-button").click();
    await page.locator(row(ADDED)).waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate("window.sawProgress"), true, "the form showed progress while AddModel ran");
    await page
      .locator("#add-model-result")
      .filter({ hasText: `added '${ADDED}'` })
      .waitFor({ timeout: 15_000 });
    assert.match((await page.locator("#add-model-result").textContent()) ?? "", /revision [0-9a-f]{7} in /);
    assert.equal(await page.locator("#add-model-error").textContent(), "");
    assert.equal(await page.locator("#add-model-source").inputValue(), "", "cleared after a success");

    assert.equal(await page.locator(`${row(ADDED)} td.source`).textContent(), addedDir);
    assert.match((await page.locator(`${row(ADDED)} td.revision`).textContent()) ?? "", /^[0-9a-f]{7}$/);
    const listed = (await clients.models.getModel({ id: ADDED })).model!;
    assert.equal(listed.source, addedDir);
    assert.equal(listed.pool, cluster.pool);
    assert.equal(await page.locator(`${row(ADDED)} td.revision`).getAttribute("title"), listed.revision);

    // The new model answers an Embed from the console's own panel.
    await page.locator(`#embed-model option[value="${ADDED}"]`).waitFor({ state: "attached", timeout: 15_000 });
    await page.locator("#embed-model").selectOption(ADDED);
    await page.locator("#embed-texts").fill(TEXTS.join("\n"));
    await page.locator("#embed-button").click();
    await page.locator(`#matrix[data-size="${TEXTS.length}"]`).waitFor({ timeout: 30_000 });
    assert.equal(await page.locator("#embed-error").textContent(), "");
    assert.equal(await page.locator("#embed-dims").textContent(), String(seeded.dimensions));
    await page
      .locator(`${row(ADDED)} td.replicas`)
      .filter({ hasText: "resident" })
      .waitFor({ timeout: 15_000 });
    await mkdir(ARTIFACTS, { recursive: true });
    await page.locator('section[aria-labelledby="models-title"]').screenshot({ path: join(ARTIFACTS, "console-registry.png") });
    assert.deepEqual(errors, []);
  });

  test("a refused source shows the code and the gateway's message, keeps what was typed, and adds nothing", async () => {
    const cases: Array<[string, string, RegExp]> = [
      ["/no/such/model/folder", "NotFound", /no folder at/],
      ["models/relative", "InvalidArgument", /absolute/],
    ];
    for (const [source, code, message] of cases) {
      await page.locator("#add-model-source").fill(source);
      await page.locator("#add-model-id").fill("console-refused");
      await page.locator("#add-model-button").click();
      const error = page.locator(`#add-model-error[data-code="${code}"]`);
      await error.waitFor({ timeout: 15_000 });
      assert.equal(await error.locator(".code").textContent(), code);
      assert.match((await error.locator(".message").textContent()) ?? "", message);
      assert.equal(await page.locator("#add-model-source").inputValue(), source, "the source stays as typed");
      assert.equal(await page.locator("#add-model-id").inputValue(), "console-refused");
      assert.equal(await page.locator("#add-model-pool").inputValue(), cluster.pool);
      assert.equal(await page.locator("#add-model-button").isEnabled(), true);
    }
    assert.equal(await page.locator(row("console-refused")).count(), 0);
    assert.ok(!(await clients.models.listModels({})).models.some((m) => m.id === "console-refused"), "nothing was written");
    assert.deepEqual(errors, []);
  });

  test("remove (after a confirm): the row goes, new calls get NotFound", async () => {
    await page.locator(`${row(ADDED)} button[data-remove="${ADDED}"]`).click();
    await page.locator(row(ADDED)).waitFor({ state: "detached", timeout: 15_000 });
    assert.equal(await page.locator("#models-error").textContent(), "");
    const gone = await codeOf(clients.inference.embed({ model: ADDED, inputs: TEXTS }, { timeoutMs: 10_000 }));
    assert.equal(gone.code, Code.NotFound, gone.message);
    assert.equal(await page.locator(row(seeded.id)).count(), 1, "the other models stay");
    assert.deepEqual(errors, []);
  });

  test("with API keys on, a key without the admin scope sees PermissionDenied and the hint", async () => {
    const key = `sk-console-${randomBytes(12).toString("hex")}`;
    const id = `${cluster.pool}-g-keys`;
    // A second gateway on the same registry, with keys on: the key may list and call, not change the registry.
    const gw = ServiceProcess.start("gateway", id, {
      KAFKA_BROKERS: kafkaBrokers(),
      SHOAL_CATALOG: cluster.catalogPath,
      SHOAL_REGISTRY_TOPIC: `shoal.registry.${cluster.pool}`,
      SHOAL_PORT: "0",
      SHOAL_INSTANCE_ID: id,
      SHOAL_API_KEYS: `viewer=${key}`,
    });
    extra.push(gw);
    const line = await gw.waitForLog((l) => l.msg === "gateway serving");
    const keyed = await openConsole(browser!, `http://127.0.0.1:${String(line["port"])}`);
    await keyed.page.locator("#api-key-input").fill(key);
    await keyed.page.locator("#api-key-input").press("Enter");
    await keyed.page.locator(row(seeded.id)).waitFor({ timeout: 15_000 });
    await keyed.page.locator("#add-model-source").fill(addedDir);
    await keyed.page.locator("#add-model-id").fill("console-not-allowed");
    await keyed.page.locator("#add-model-button").click();
    const error = keyed.page.locator('#add-model-error[data-code="PermissionDenied"]');
    await error.waitFor({ timeout: 15_000 });
    assert.match((await error.locator(".message").textContent()) ?? "", /may not change the model registry/);
    assert.match((await error.locator(".hint").textContent()) ?? "", /admin scope/);
    assert.equal(await keyed.page.locator("#add-model-source").inputValue(), addedDir);
    assert.deepEqual(keyed.errors, []);
    await keyed.page.close();
  });
});
