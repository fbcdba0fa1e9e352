import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { kafkaBrokers, startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf, maxAbsDiff } from "./harness/clients.ts";
import { ServiceProcess } from "./harness/service-process.ts";
import { tinyVariant } from "./harness/tiny-variant.ts";

const TEXTS = ["a live registry adds models without restarts", "the cat sat on the mat", "kafka keeps the state"];

/**
 * The model registry on real processes: models added, aliased and removed through
 * ModelAdminService while a gateway and a worker keep serving, with no process restarted.
 */
describe("live model registry: add, alias, remove on a running cluster", () => {
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;
  let admin: Client<typeof ModelAdminService>;
  let catalogModel: string;
  let addedDir: string;
  const extra: ServiceProcess[] = [];

  before(async () => {
    cluster = await startCluster({ presets: ["tiny"], workers: 1, workerEnv: { SHOAL_STATUS_INTERVAL_MS: "500" } });
    clients = clientsFor(cluster.urls[0]!, "connect");
    admin = createClient(ModelAdminService, createConnectTransport({ baseUrl: cluster.urls[0]!, httpVersion: "1.1" }));
    catalogModel = cluster.modelIds[0]!;
    // The catalog's own tiny encoder, copied to a folder of its own: the same weights under another id.
    addedDir = await tinyVariant("tiny-copy", {});
  });
  after(async () => {
    await Promise.all(extra.map((p) => p.stop("SIGTERM")));
    await cluster?.stop();
  });

  const embed = async (model: string) => (await clients.inference.embed({ model, inputs: TEXTS }, { timeoutMs: 30_000 })).embeddings.map((e) => e.values);

  test("AddModel of a folder on a running cluster: first answer within seconds, vectors equal to the catalog's copy", async () => {
    const t0 = performance.now();
    const added = await admin.addModel({ source: addedDir, id: "live-tiny", pool: cluster.pool });
    const addedS = (performance.now() - t0) / 1000;
    assert.equal(added.model?.id, "live-tiny");
    assert.equal(added.model?.source, addedDir);
    assert.match(added.model?.revision ?? "", /^[0-9a-f]{40}$/);
    const res = await clients.inference.embed({ model: "live-tiny", inputs: TEXTS }, { timeoutMs: 30_000 });
    const firstS = (performance.now() - t0) / 1000;
    process.stderr.write(`AddModel answered in ${addedS.toFixed(2)} s; first Embed answer ${firstS.toFixed(2)} s after AddModel (no process restarted)\n`);
    assert.ok(firstS < 30, `first answer within seconds (${firstS.toFixed(2)} s)`);
    assert.equal(res.model, "live-tiny");
    const fromCatalog = await embed(catalogModel);
    const fromRegistry = res.embeddings.map((e) => e.values);
    for (let i = 0; i < TEXTS.length; i++) assert.ok(maxAbsDiff(fromRegistry[i]!, fromCatalog[i]!) < 1e-6, `text ${i}: same vector as the catalog's model`);
    const listed = (await clients.models.listModels({})).models;
    assert.deepEqual(listed.map((m) => m.id).sort(), [catalogModel, "live-tiny"].sort());
    assert.match(listed.find((m) => m.id === catalogModel)?.revision ?? "", /^[0-9a-f]{40}$/, "seeded catalog models carry a revision too");
  });

  test("SetAlias and repoint: calls through the alias reach the model it points at now", async () => {
    assert.equal((await admin.setAlias({ alias: "embed-default", target: catalogModel })).model, catalogModel);
    let res = await clients.inference.embed({ model: "embed-default", inputs: TEXTS.slice(0, 1) }, { timeoutMs: 30_000 });
    assert.equal(res.model, catalogModel, "the response names the concrete model");
    assert.equal((await admin.setAlias({ alias: "embed-default", target: "live-tiny" })).model, "live-tiny");
    res = await clients.inference.embed({ model: "embed-default", inputs: TEXTS.slice(0, 1) }, { timeoutMs: 30_000 });
    assert.equal(res.model, "live-tiny");
    const listed = (await clients.models.listModels({})).models;
    assert.deepEqual(listed.find((m) => m.id === "live-tiny")?.aliases, ["embed-default"]);
    assert.deepEqual(listed.find((m) => m.id === catalogModel)?.aliases, []);
    assert.equal((await clients.models.getModel({ id: "embed-default" })).model?.id, "live-tiny");
  });

  test("bad input: right codes, nothing written, the cluster serving throughout", async () => {
    const empty = await mkdtemp(join(tmpdir(), "shoal-not-a-model-"));
    const cases: Array<[string, () => Promise<unknown>, Code, RegExp]> = [
      ["unknown source path", () => admin.addModel({ source: "/no/such/model/folder", id: "x1", pool: cluster.pool }), Code.NotFound, /no folder at/],
      ["relative path", () => admin.addModel({ source: "models/x", id: "x2", pool: cluster.pool }), Code.InvalidArgument, /absolute/],
      ["a folder with no manifest", () => admin.addModel({ source: empty, id: "x3", pool: cluster.pool }), Code.InvalidArgument, /shoal-model\.json/],
      ["duplicate id", () => admin.addModel({ source: addedDir, id: "live-tiny", pool: cluster.pool }), Code.AlreadyExists, /already served/],
      ["unknown pool", () => admin.addModel({ source: addedDir, id: "x4", pool: "nope" }), Code.InvalidArgument, /no pool 'nope'/],
      ["remove unknown", () => admin.removeModel({ id: "never-added" }), Code.NotFound, /not in the registry/],
      ["remove a model an alias points at", () => admin.removeModel({ id: "live-tiny" }), Code.FailedPrecondition, /embed-default/],
      ["alias to nothing", () => admin.setAlias({ alias: "dangling", target: "never-added" }), Code.NotFound, /no model or alias/],
      ["alias named like a model", () => admin.setAlias({ alias: catalogModel, target: "live-tiny" }), Code.AlreadyExists, /is a model id/],
    ];
    for (const [what, call, code, message] of cases) {
      const got = await codeOf(call());
      assert.equal(got.code, code, `${what}: ${got.message}`);
      assert.match(got.message, message, what);
    }
    await admin.setAlias({ alias: "loop-a", target: "embed-default" });
    await admin.setAlias({ alias: "loop-b", target: "loop-a" });
    const loop = await codeOf(admin.setAlias({ alias: "loop-a", target: "loop-b" }));
    assert.equal(loop.code, Code.InvalidArgument, loop.message);
    assert.match(loop.message, /alias loop: loop-a → loop-b → loop-a/);
    await admin.removeAlias({ alias: "loop-b" });
    await admin.removeAlias({ alias: "loop-a" });
    const listed = (await clients.models.listModels({})).models.map((m) => m.id).sort();
    assert.deepEqual(listed, [catalogModel, "live-tiny"].sort(), "nothing refused was written");
    assert.equal((await embed(catalogModel)).length, TEXTS.length, "the catalog model still answers");
  });

  test("RemoveModel with calls in flight: they finish, new calls get NotFound", async () => {
    await admin.addModel({ source: await tinyVariant("doomed", {}), pool: cluster.pool });
    await embed("doomed");
    const texts = Array.from({ length: 32 }, (_, i) => `${TEXTS[i % TEXTS.length]} ${i}`);
    const inFlight = Array.from({ length: 12 }, () => clients.inference.embed({ model: "doomed", inputs: texts }, { timeoutMs: 30_000 }));
    await new Promise((r) => setTimeout(r, 20));
    await admin.removeModel({ id: "doomed" });
    const settled = await Promise.allSettled(inFlight);
    const failed = settled.filter((s) => s.status === "rejected");
    assert.equal(failed.length, 0, `calls in flight at the removal finish: ${failed.map((f) => String((f as PromiseRejectedResult).reason)).join("; ")}`);
    const after = await codeOf(clients.inference.embed({ model: "doomed", inputs: TEXTS }, { timeoutMs: 10_000 }));
    assert.equal(after.code, Code.NotFound, after.message);
    assert.ok(!(await clients.models.listModels({})).models.some((m) => m.id === "doomed"));
    assert.equal((await embed("live-tiny")).length, TEXTS.length, "the other models keep answering");
  });

  test("a restarted gateway reads the registry: the added model, its alias, not the removed one", async () => {
    const id = `${cluster.pool}-g-restarted`;
    const gw = ServiceProcess.start("gateway", id, {
      KAFKA_BROKERS: kafkaBrokers(),
      SHOAL_CATALOG: cluster.catalogPath,
      SHOAL_REGISTRY_TOPIC: `shoal.registry.${cluster.pool}`,
      SHOAL_PORT: "0",
      SHOAL_INSTANCE_ID: id,
    });
    extra.push(gw);
    const line = await gw.waitForLog((l) => l.msg === "gateway serving");
    const fresh = clientsFor(`http://127.0.0.1:${String(line["port"])}`, "connect");
    const listed = (await fresh.models.listModels({})).models;
    assert.deepEqual(listed.map((m) => m.id).sort(), [catalogModel, "live-tiny"].sort());
    assert.deepEqual(listed.find((m) => m.id === "live-tiny")?.aliases, ["embed-default"]);
    const res = await fresh.inference.embed({ model: "embed-default", inputs: TEXTS }, { timeoutMs: 30_000 });
    assert.equal(res.model, "live-tiny");
  });
});
