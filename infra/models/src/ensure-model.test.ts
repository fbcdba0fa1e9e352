import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { cachedModelDir, COMPLETE_MARKER, ensureModel, modelCacheRoot } from "./ensure-model.ts";
import { MANIFEST_FILE } from "./manifest.ts";
import { GENERATOR_VERSION } from "./presets.ts";

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "shoal-cache-test-"));
});
after(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

test("cache root honours SHOAL_CACHE and falls back to ~/.cache/shoal", () => {
  assert.equal(modelCacheRoot({ SHOAL_CACHE: "/x/y" }), join("/x/y", "models"));
  assert.match(modelCacheRoot({}), /[/\\]\.cache[/\\]shoal[/\\]models$/);
  assert.equal(cachedModelDir("tiny", "/r"), join("/r", `tiny-g${GENERATOR_VERSION}`));
  assert.throws(() => cachedModelDir("huge", "/r"), /unknown preset/);
});

test("builds once, then serves from the cache; concurrent callers share one build", async () => {
  const results: boolean[] = [];
  const [d1, d2] = await Promise.all([
    ensureModel("tiny", { root, onResult: (b) => results.push(b) }),
    ensureModel("tiny", { root, onResult: (b) => results.push(b) }),
  ]);
  assert.equal(d1, join(root, `tiny-g${GENERATOR_VERSION}`));
  assert.equal(d2, d1);
  assert.deepEqual(results.sort(), [false, true]);
  await access(join(d1, COMPLETE_MARKER));
  await access(join(d1, MANIFEST_FILE));
  const marker = JSON.parse(await readFile(join(d1, COMPLETE_MARKER), "utf8")) as { files: Record<string, unknown> };
  assert.ok("model.onnx" in marker.files);
  // no temporary directories left behind
  assert.deepEqual(await readdir(root), [`tiny-g${GENERATOR_VERSION}`]);

  let built: boolean | undefined;
  assert.equal(
    await ensureModel("tiny", {
      root,
      onResult: (b) => {
        built = b;
      },
    }),
    d1,
  );
  assert.equal(built, false);
});

test("an incomplete directory (no marker) is replaced", async () => {
  const staleRoot = join(root, "stale");
  const dir = cachedModelDir("tiny", staleRoot);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "model.onnx"), "partial");
  let built: boolean | undefined;
  assert.equal(
    await ensureModel("tiny", {
      root: staleRoot,
      onResult: (b) => {
        built = b;
      },
    }),
    dir,
  );
  assert.equal(built, true);
  await access(join(dir, COMPLETE_MARKER));
  assert.ok((await readFile(join(dir, "model.onnx"))).byteLength > 1e6);
});

test("ensure CLI prints the cached path with --print-path", async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "ensure.ts"), "--preset", "tiny", "--print-path"],
    { env: { ...process.env, SHOAL_CACHE: join(root, "cli") } },
  );
  assert.equal(stdout, `${join(root, "cli", "models", `tiny-g${GENERATOR_VERSION}`)}\n`);
});
