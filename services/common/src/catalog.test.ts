import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ensureModel } from "@shoal/models";
import { CatalogError, loadCatalog } from "./catalog.ts";

describe("model catalog", () => {
  let dir: string;
  let tiny: string;
  before(async () => {
    tiny = await ensureModel("tiny");
    dir = await mkdtemp(join(tmpdir(), "shoal-catalog-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function write(text: string): Promise<string> {
    const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(path, text);
    return path;
  }

  test("a valid catalog: env expansion, pools, id override, batching overrides", async () => {
    const path = await write(
      `pools:\n  gpu: { partitions: 3 }\nmodels:\n  - path: \${TINY_DIR}\n    pool: gpu\n    id: my-model\n    batching: { policy: fixed-window, maxBatchItems: 16 }\n`,
    );
    const catalog = await loadCatalog(path, { TINY_DIR: tiny });
    assert.equal(catalog.pools.get("gpu")?.partitions, 3);
    const m = catalog.models.get("my-model");
    assert.ok(m);
    assert.equal(m.pool, "gpu");
    assert.equal(m.spec.task, "embed");
    assert.deepEqual(m.batching, { policy: "fixed-window", maxBatchItems: 16 });
    assert.equal(m.pinned, false);
  });

  test("jobTopics: per-lane by default, per-model lists the pool's models; per-model needs share intake", async () => {
    const path = await write(
      `pools:\n  gpu: { jobTopics: per-model }\n  cpu: {}\nmodels:\n  - path: \${TINY_DIR}\n    pool: gpu\n    id: zeta\n  - path: \${TINY_DIR}\n    pool: gpu\n    id: alpha\n  - path: \${TINY_DIR}\n    pool: cpu\n    id: other\n`,
    );
    const catalog = await loadCatalog(path, { TINY_DIR: tiny });
    assert.equal(catalog.pools.get("gpu")?.jobTopics, "per-model");
    assert.deepEqual(catalog.pools.get("gpu")?.models, ["alpha", "zeta"]);
    assert.equal(catalog.pools.get("cpu")?.jobTopics, "per-lane");
    assert.deepEqual(catalog.pools.get("cpu")?.models, ["other"]);
    const bad = await write(
      `pools:\n  g: { intake: group, jobTopics: per-model }\n  h: { jobTopics: sideways }\nmodels:\n  - path: \${TINY_DIR}\n    pool: g\n`,
    );
    await assert.rejects(loadCatalog(bad, { TINY_DIR: tiny }), (err: Error) => {
      assert.match(err.message, /pools\.g\.jobTopics: per-model needs intake: share/);
      assert.match(err.message, /pools\.h\.jobTopics: expected one of per-lane, per-model \(got "sideways"\)/);
      return true;
    });
  });

  test("workers: the pool size planned for the capacity check, optional, a positive integer", async () => {
    const path = await write(`pools:\n  gpu: { workers: 64 }\n  cpu: {}\nmodels:\n  - path: \${TINY_DIR}\n    pool: gpu\n`);
    const catalog = await loadCatalog(path, { TINY_DIR: tiny });
    assert.equal(catalog.pools.get("gpu")?.workers, 64);
    assert.equal(catalog.pools.get("cpu")?.workers, undefined);
    const bad = await write(`pools:\n  gpu: { workers: 0 }\nmodels:\n  - path: \${TINY_DIR}\n    pool: gpu\n`);
    await assert.rejects(loadCatalog(bad, { TINY_DIR: tiny }), /pools\.gpu\.workers: expected a positive integer/);
  });

  test("pinned and memory: sizes with units or bytes", async () => {
    const path = await write(
      `models:\n  - path: \${TINY_DIR}\n    id: a\n    pinned: true\n    memory: 120MiB\n  - path: \${TINY_DIR}\n    id: b\n    memory: 5000\n`,
    );
    const catalog = await loadCatalog(path, { TINY_DIR: tiny });
    assert.equal(catalog.models.get("a")?.pinned, true);
    assert.equal(catalog.models.get("a")?.memoryBytes, 120 * 1024 * 1024);
    assert.equal(catalog.models.get("b")?.pinned, false);
    assert.equal(catalog.models.get("b")?.memoryBytes, 5000);
  });

  test("every problem at once, each naming the file, the model and the field", async () => {
    const path = await write(
      [
        "pools:",
        "  default: { partitions: 0 }",
        "models:",
        `  - path: ${JSON.stringify(tiny)}`,
        "    pool: nowhere",
        "    batching: { policy: fastest, maxWaitMs: -1, colour: red }",
        "    pinned: sometimes",
        "    memory: lots",
        "  - path: /does/not/exist",
        `  - path: ${JSON.stringify(tiny)}`,
        `  - path: ${JSON.stringify(tiny)}`,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: literal YAML text; the test checks the catalog's own ${VAR} expansion
        "  - path: ${UNSET_VARIABLE_FOR_TEST}",
        "",
      ].join("\n"),
    );
    await assert.rejects(loadCatalog(path, {}), (err: unknown) => {
      assert.ok(err instanceof CatalogError);
      const text = err.problems.join("\n");
      for (const expected of [
        /pools\.default\.partitions/,
        /models\[0\]\.pool: unknown pool 'nowhere'/,
        /models\[0\]\.batching\.policy/,
        /models\[0\]\.batching\.maxWaitMs/,
        /models\[0\]\.batching\.colour: unknown field/,
        /models\[0\]\.pinned: expected true or false/,
        /models\[0\]\.memory: expected a positive size/,
        /models\[1\]: .*\/does\/not\/exist/,
        /duplicate model id/,
        /models\[4\]\.path: environment variable UNSET_VARIABLE_FOR_TEST is not set/,
      ]) {
        assert.match(text, expected);
      }
      assert.ok(
        err.problems.every((p) => p.startsWith(path)),
        "each problem names the file",
      );
      return true;
    });
  });

  test("a file that is not YAML, or has no models, is a CatalogError", async () => {
    await assert.rejects(loadCatalog(await write("models: [unclosed\n")), CatalogError);
    await assert.rejects(loadCatalog(await write("pools: {}\n")), /models: expected a non-empty list/);
  });

  test("runtime: onnx by default; sidecar:pytorch with its weights folder (default torch/), checked for a config.json", async () => {
    const weights = join(dir, "hf");
    await mkdir(weights, { recursive: true });
    await writeFile(join(weights, "config.json"), "{}");
    const ok = await write(
      `models:\n  - path: ${JSON.stringify(tiny)}\n    id: a\n  - path: ${JSON.stringify(tiny)}\n    id: b\n    runtime: sidecar:pytorch\n    weights: ${JSON.stringify(weights)}\n`,
    );
    const catalog = await loadCatalog(ok, {});
    assert.deepEqual(catalog.models.get("a")?.runtime, { kind: "onnx" });
    assert.deepEqual(catalog.models.get("b")?.runtime, { kind: "sidecar", sidecar: "pytorch", weightsDir: weights });
    const bad = await write(
      `models:\n  - path: ${JSON.stringify(tiny)}\n    id: c\n    runtime: sidecar:tensorflow\n  - path: ${JSON.stringify(tiny)}\n    id: d\n    runtime: sidecar:pytorch\n  - path: ${JSON.stringify(tiny)}\n    id: e\n    weights: hf\n`,
    );
    await assert.rejects(loadCatalog(bad, {}), (err: unknown) => {
      assert.ok(err instanceof CatalogError);
      const text = err.problems.join("\n");
      assert.match(text, /models\[0\]\.runtime: expected onnx or sidecar:pytorch \(got "sidecar:tensorflow"\)/);
      assert.match(text, /models\[1\]\.weights: .*\/torch has no config\.json/);
      assert.match(text, /models\[2\]\.weights: only a sidecar runtime reads weights/);
      return true;
    });
  });
});
