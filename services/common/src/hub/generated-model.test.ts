import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { getPreset, writeHubModelDir } from "@shoal/models";
import { readModelDir } from "../model-manifest.ts";
import { startFakeHub } from "./fake-hub.ts";
import { fetchHubModel } from "./fetch-hub-model.ts";

test("a generated model in Hub layout, served by the fake Hub, is fetched whole and reads as an embedder", async (t) => {
  const scratch = await mkdtemp(join(tmpdir(), "shoal-hub-gen-"));
  const hub = await startFakeHub();
  t.after(async () => {
    await hub.close();
    await rm(scratch, { recursive: true, force: true });
  });
  const source = join(scratch, "repo");
  const written = await writeHubModelDir(source, getPreset("tiny"), { prompts: { query: "query: ", passage: "passage: " } });
  const sha = await hub.addRevision("shoal-test/tiny-embed", { dir: source });

  const model = await fetchHubModel({ repo: "shoal-test/tiny-embed", endpoint: hub.url, cacheDir: join(scratch, "hub"), env: { HF_HOME: scratch } });
  assert.equal(model.commitSha, sha);
  assert.ok(model.files.includes("onnx/model.onnx"));
  assert.ok(model.files.includes("config.json"));
  for (const file of model.files) {
    assert.ok(written.files.includes(file), `${file} was written by writeHubModelDir`);
    assert.deepEqual(await readFile(join(model.dir, file)), await readFile(join(source, file)), file);
  }
  const spec = await readModelDir(model.dir);
  assert.equal(spec.task, "embed");
});
