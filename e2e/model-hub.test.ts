import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { startFakeHub, type FakeHub } from "@shoal/common/fake-hub";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { getPreset, writeHubModelDir } from "@shoal/models";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { clientsFor, codeOf } from "./harness/clients.ts";
import { cosine } from "../infra/pretrained/cosine.ts";

const MODELS_CLI = fileURLToPath(new URL("../services/client/src/models-cli.ts", import.meta.url));

const TEXTS = ["models by name, live", "a hub repository with no manifest", "the same weights, the same vectors"];

/**
 * Models by name on a running cluster: a Hub-layout folder with no shoal-model.json, and `hf:` ids
 * served by a Hub-shaped server the test starts (HF_ENDPOINT), each added with AddModel while the
 * gateway and worker keep serving; and the Hub's failures, each a clear code with nothing written.
 */
describe("models by name: Hub-layout folders and hf: ids added to a running cluster", () => {
  let hub: FakeHub;
  let scratch: string;
  let repoDir: string;
  let cluster: TestCluster;
  let clients: ReturnType<typeof clientsFor>;
  let admin: Client<typeof ModelAdminService>;
  let catalogModel: string;
  let sha: string;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "shoal-model-hub-"));
    hub = await startFakeHub();
    // The catalog's tiny encoder, laid out as a sentence-transformers repository: the same weights.
    repoDir = join(scratch, "repo");
    await writeHubModelDir(repoDir, getPreset("tiny"));
    sha = await hub.addRevision("shoal-test/tiny-embed", { dir: repoDir });
    await hub.addRevision("shoal-test/gated-embed", { dir: repoDir });
    hub.gate("shoal-test/gated-embed", "hf_secret_token_for_the_test");
    await hub.addRevision("shoal-test/corrupt-embed", { dir: repoDir });
    hub.corrupt("shoal-test/corrupt-embed", "onnx/model.onnx");
    // Several ONNX exports: the one asked for is fetched and run, the default one never fetched.
    const variantsDir = join(scratch, "variants");
    await writeHubModelDir(variantsDir, getPreset("tiny"), { onnxVariants: ["qint8_avx512"] });
    await hub.addRevision("shoal-test/tiny-variants", { dir: variantsDir });
    // A model that says it needs 64 GiB resident: more than any worker's budget.
    const hugeDir = join(scratch, "huge");
    await writeHubModelDir(hugeDir, getPreset("tiny"));
    await writeFile(join(hugeDir, "shoal-model.json"), JSON.stringify({ memoryBytes: 64 * 1024 ** 3 }));
    const hubEnv = (who: string) => ({ HF_ENDPOINT: hub.url, HF_HOME: join(scratch, who), HF_HUB_CACHE: join(scratch, who, "hub"), HF_TOKEN: "" });
    cluster = await startCluster({ presets: ["tiny"], workers: 1, gatewayEnv: hubEnv("gateway"), workerEnv: hubEnv("worker") });
    clients = clientsFor(cluster.urls[0]!, "connect");
    admin = createClient(ModelAdminService, createConnectTransport({ baseUrl: cluster.urls[0]!, httpVersion: "1.1" }));
    catalogModel = cluster.modelIds[0]!;
  });
  after(async () => {
    await cluster?.stop();
    await hub?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  const embed = async (model: string) => (await clients.inference.embed({ model, inputs: TEXTS }, { timeoutMs: 30_000 })).embeddings.map((e) => e.values);

  /** Adds `source` as `id`, then times its first answer; its vectors against the catalog's copy. */
  async function addAndCompare(source: string, id: string, beforeFirstCall?: () => Promise<void>): Promise<{ revision: string }> {
    const t0 = performance.now();
    const added = await admin.addModel({ source, id, pool: cluster.pool });
    await beforeFirstCall?.();
    const res = await clients.inference.embed({ model: id, inputs: TEXTS }, { timeoutMs: 30_000 });
    const firstS = (performance.now() - t0) / 1000;
    process.stderr.write(`${source}: first answer ${firstS.toFixed(2)} s after AddModel, no process restarted\n`);
    assert.equal(res.model, id);
    const reference = await embed(catalogModel);
    for (let i = 0; i < TEXTS.length; i++) {
      const c = cosine(res.embeddings[i]!.values, reference[i]!);
      assert.ok(c >= 0.9999, `text ${i}: cosine ${c} against the catalog's copy of the weights`);
    }
    assert.equal(added.model?.source, source);
    return { revision: added.model?.revision ?? "" };
  }

  test("a Hub-layout folder with no shoal-model.json: added, answered, the catalog's vectors", async () => {
    await addAndCompare(repoDir, "tiny-hub-folder");
  });

  test("the CLI adds a model by name: `npm run shoal -- models add hf:... --onnx <variant>`", async () => {
    const run = promisify(execFile);
    const { stdout } = await run(
      process.execPath,
      [
        "--import",
        "tsx",
        MODELS_CLI,
        "models",
        "add",
        "hf:shoal-test/tiny-variants",
        "--id",
        "tiny-variant",
        "--pool",
        cluster.pool,
        "--onnx",
        "qint8_avx512",
        "--gateway",
        cluster.urls[0]!,
      ],
      { timeout: 60_000 },
    );
    assert.match(stdout, /^added tiny-variant \(revision [0-9a-f]{40}, pool .+\) in \d+\.\d+ s$/m);
    const res = await clients.inference.embed({ model: "tiny-variant", inputs: TEXTS }, { timeoutMs: 30_000 });
    assert.equal(res.embeddings.length, TEXTS.length);
    // The generated variant is a byte copy of the default export (one blob), so tell them apart by the path resolved.
    const resolved = hub.requests.filter((r) => r.path.startsWith("/shoal-test/tiny-variants/resolve/")).map((r) => r.path);
    assert.ok(
      resolved.some((p) => p.endsWith("/onnx/model_qint8_avx512.onnx")),
      `the variant asked for was fetched: ${resolved.join(", ")}`,
    );
    assert.ok(!resolved.some((p) => p.endsWith("/onnx/model.onnx")), `the default export was not fetched: ${resolved.join(", ")}`);
    const { stdout: listing } = await run(process.execPath, ["--import", "tsx", MODELS_CLI, "models", "ls", "--gateway", cluster.urls[0]!], {
      timeout: 60_000,
    });
    assert.match(listing, /^tiny-variant\s+\S+\s+[0-9a-f]{12}\s+hf:shoal-test\/tiny-variants$/m);
  });

  test("hf:<org>/<name>: resolved to its commit, fetched by the gateway at AddModel and by the worker on its first call, the catalog's vectors", async () => {
    const onnxGets = (): number => hub.contentRequests("shoal-test/tiny-embed", "onnx/model.onnx").length;
    const { revision } = await addAndCompare("hf:shoal-test/tiny-embed", "tiny-hub-id", async () => {
      // Time for the worker to read the record (well under a second here): it knows the model, fetches nothing yet.
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(onnxGets(), 1, "only the gateway fetched the ONNX file before the model's first call");
    });
    assert.equal(onnxGets(), 2, "the worker fetched it into its own cache on the first call");
    assert.equal(revision, sha, "the registry records the commit sha main resolved to");
    const listed = (await clients.models.listModels({})).models.find((m) => m.id === "tiny-hub-id");
    assert.equal(listed?.revision, sha);
    assert.equal(listed?.task, (await clients.models.getModel({ id: catalogModel })).model?.task);
  });

  test("the Hub's failures: right codes, nothing written, the other models serving", async () => {
    const cases: Array<[string, string, Code, RegExp]> = [
      ["unknown repository", "hf:shoal-test/no-such-model", Code.NotFound, /repository not found/],
      ["unknown revision", "hf:shoal-test/tiny-embed@v9-no-such-tag", Code.NotFound, /revision "v9-no-such-tag" not found/],
      ["gated, no token", "hf:shoal-test/gated-embed", Code.PermissionDenied, /HF_TOKEN/],
      ["corrupt download", "hf:shoal-test/corrupt-embed", Code.Unavailable, /onnx\/model\.onnx/],
      ["malformed id", "hf:only-a-name", Code.InvalidArgument, /org\/name|org/],
      ["an ONNX variant the repository lacks", "hf:shoal-test/tiny-embed", Code.NotFound, /model_fp16\.onnx/],
      ["larger than any worker's memory budget", join(scratch, "huge"), Code.FailedPrecondition, /memory budget/],
    ];
    for (const [what, source, code, message] of cases) {
      const onnxVariant = what.startsWith("an ONNX variant") ? "fp16" : "";
      const got = await codeOf(admin.addModel({ source, id: "refused-model", pool: cluster.pool, onnxVariant }));
      assert.equal(got.code, code, `${what}: ${got.message}`);
      assert.match(got.message, message, what);
    }
    const ids = (await clients.models.listModels({})).models.map((m) => m.id);
    assert.ok(!ids.includes("refused-model"), "a refused source wrote nothing");
    assert.equal((await embed(catalogModel)).length, TEXTS.length, "the catalog's model answered throughout");
  });
});
