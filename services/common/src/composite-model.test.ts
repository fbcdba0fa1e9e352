import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ensureModel } from "@shoal/models";
import { CatalogError, loadCatalog } from "./catalog.ts";
import { DEFAULT_ZERO_SHOT_TEMPERATURE } from "./composite-model.ts";

describe("composite models in the catalog (biEncoder, zeroShot)", () => {
  let dir: string;
  const env: Record<string, string> = {};
  before(async () => {
    env["TINY"] = await ensureModel("tiny");
    env["RERANK"] = await ensureModel("tiny-rerank");
    dir = await mkdtemp(join(tmpdir(), "shoal-composite-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function load(models: string, pools = "pools:\n  default: {}\n  other: {}\n"): Promise<Awaited<ReturnType<typeof loadCatalog>>> {
    const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(path, `${pools}models:\n  - path: \${TINY}\n    id: emb\n  - path: \${RERANK}\n    id: xenc\n${models}`);
    return loadCatalog(path, env);
  }
  async function problems(models: string): Promise<string> {
    try {
      await load(models);
    } catch (err) {
      assert.ok(err instanceof CatalogError);
      return err.message;
    }
    assert.fail("the catalog loaded");
  }

  test("a bi-encoder ranker: a rerank model in its embedder's pool, with the embedder's files and limits", async () => {
    const catalog = await load("  - id: rank\n    biEncoder: { embedder: emb }\n    pinned: true\n");
    const m = catalog.models.get("rank");
    const emb = catalog.models.get("emb")!;
    assert.ok(m);
    assert.deepEqual(m.composite, { kind: "bi-encoder", embedder: "emb" });
    assert.equal(m.spec.task, "rerank");
    assert.equal(m.spec.dimensions, 1);
    assert.equal(m.spec.task === "rerank" && m.spec.scoreActivation, "none");
    assert.equal(m.spec.maxSequenceLength, emb.spec.maxSequenceLength);
    assert.equal(m.spec.tokenizerPath, emb.spec.tokenizerPath);
    assert.equal(m.spec.origin, emb.spec.origin);
    assert.equal(m.pool, "default");
    assert.equal(m.pinned, true);
    assert.ok(!("prompts" in m.spec), "no embed-only fields on a rerank spec");
    assert.deepEqual(catalog.pools.get("default")?.models, ["emb", "rank", "xenc"]);
  });

  test("a zero-shot classifier: labels in entry order, its temperature or the default", async () => {
    const catalog = await load(
      [
        "  - id: intent",
        "    zeroShot:",
        "      embedder: emb",
        "      temperature: 0.1",
        "      labels:",
        '        billing: "a question about an invoice"',
        '        bug: "a report that something is broken"',
        '        praise: "a thank-you"',
        "  - id: mood",
        "    zeroShot: { embedder: emb, labels: { positive: happy, negative: sad } }",
        "",
      ].join("\n"),
    );
    const m = catalog.models.get("intent")!;
    assert.equal(m.spec.task, "classify");
    assert.deepEqual(m.spec.task === "classify" && m.spec.labels, ["billing", "bug", "praise"]);
    assert.equal(m.spec.dimensions, 3);
    assert.equal(m.composite?.kind === "zero-shot" && m.composite.temperature, 0.1);
    assert.equal(m.composite?.kind === "zero-shot" && m.composite.labels[0]?.description, "a question about an invoice");
    const mood = catalog.models.get("mood")!;
    assert.equal(mood.composite?.kind === "zero-shot" && mood.composite.temperature, DEFAULT_ZERO_SHOT_TEMPERATURE);
  });

  test("an unknown embedder or one of the wrong task is a CatalogError naming the field", async () => {
    assert.match(await problems("  - id: rank\n    biEncoder: { embedder: nope }\n"), /models\[2\]\.biEncoder\.embedder: no model 'nope' in the catalog/);
    assert.match(
      await problems("  - id: cls\n    zeroShot: { embedder: xenc, labels: { a: x, b: y } }\n"),
      /models\[2\]\.zeroShot\.embedder: 'xenc' is a rerank model; a composite scores through an embed model/,
    );
  });

  test("every other problem at once, each naming its field", async () => {
    const msg = await problems(
      [
        "  - biEncoder: { embedder: emb, prompt: x }",
        "  - id: c1",
        "    zeroShot: { embedder: emb, temperature: 0, labels: { only: one } }",
        "  - id: c2",
        "    zeroShot: { embedder: emb, labels: { a: '', b: y } }",
        "    memory: 10MiB",
        "  - id: c3",
        "    biEncoder: { embedder: emb }",
        "    zeroShot: { embedder: emb, labels: { a: x, b: y } }",
        "  - id: c4",
        "    biEncoder: { embedder: emb }",
        "    pool: other",
        "  - id: emb",
        "    biEncoder: { embedder: emb }",
        "",
      ].join("\n"),
    );
    assert.match(msg, /models\[2\]\.id: required for a composite model/);
    assert.match(msg, /models\[2\]\.biEncoder\.prompt: unknown field/);
    assert.match(msg, /models\[3\]\.zeroShot\.temperature: expected a number in \(0, 10\]/);
    assert.match(msg, /models\[3\]\.zeroShot\.labels: expected a mapping of at least 2 label names/);
    assert.match(msg, /models\[4\]\.zeroShot\.labels\.a: expected a non-empty description/);
    assert.match(msg, /models\[4\]\.memory: not allowed on a zero-shot model/);
    assert.match(msg, /models\[5\]: give one of biEncoder or zeroShot, not both/);
    assert.match(msg, /models\[6\]\.pool: 'other' differs from the pool 'default' of its embedder 'emb'/);
    assert.match(msg, /models\[7\]\.id: duplicate model id 'emb'/);
  });
});
