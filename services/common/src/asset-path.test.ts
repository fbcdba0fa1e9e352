import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { firstExisting } from "./asset-path.ts";

test("firstExisting: the first path that exists, else the last one given", async () => {
  const dir = await mkdtemp(join(tmpdir(), "shoal-asset-"));
  try {
    const bundled = join(dir, "beside-the-bundle.py");
    const source = join(dir, "in-the-source-tree.py");
    assert.equal(firstExisting([bundled, source]), source, "neither exists: the source tree's, for the error to name");
    await writeFile(source, "");
    assert.equal(firstExisting([bundled, source]), source);
    await writeFile(bundled, "");
    assert.equal(firstExisting([bundled, source]), bundled, "the bundle's place wins when both exist");
    assert.equal(firstExisting([dir]), dir, "a folder counts too");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
