import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileTimesPath, readFileTimes, recordFileTimes } from "./file-times.ts";

test("recordFileTimes merges over the earlier record; readFileTimes skips what is not a time", async () => {
  const dir = await mkdtemp(join(tmpdir(), "shoal-file-times-"));
  try {
    const path = join(dir, "nested", "times.json");
    assert.equal((await readFileTimes(path)).size, 0, "no file yet: no times");
    await recordFileTimes(
      new Map([
        ["e2e/a.test.ts", 1_234.6],
        ["e2e/b.test.ts", 10],
      ]),
      path,
    );
    await recordFileTimes(new Map([["e2e/b.test.ts", 20]]), path);
    assert.deepEqual(
      [...(await readFileTimes(path))],
      [
        ["e2e/a.test.ts", 1_235],
        ["e2e/b.test.ts", 20],
      ],
    );

    await writeFile(path, JSON.stringify({ "e2e/a.test.ts": 7, "e2e/b.test.ts": "slow", "e2e/c.test.ts": -1, "e2e/d.test.ts": null }));
    assert.deepEqual([...(await readFileTimes(path))], [["e2e/a.test.ts", 7]]);
    await writeFile(path, "{ not json");
    assert.equal((await readFileTimes(path)).size, 0, "an unreadable record is no record");
    await recordFileTimes(new Map([["e2e/c.test.ts", 3]]), path);
    assert.deepEqual(JSON.parse(await readFile(path, "utf8")), { "e2e/c.test.ts": 3 });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("fileTimesPath: in the Shoal cache (SHOAL_CACHE, else ~/.cache/shoal)", () => {
  assert.equal(fileTimesPath({ SHOAL_CACHE: "/x/y" }), "/x/y/test-file-times.json");
  assert.match(fileTimesPath({}), /\/\.cache\/shoal\/test-file-times\.json$/);
});
