/**
 * A node:test reporter that prints, at the end of a run, the test files that took longest: each
 * file's top-level tests and suites, summed. `npm test` runs it beside the spec reporter, so every
 * run (CI's included) shows where its time goes. It also records the times in the Shoal cache
 * (`file-times.ts`), from which the next run orders its e2e files.
 */
import { relative } from "node:path";
import type { TestEvent } from "node:test/reporters";
import { recordFileTimes } from "./file-times.ts";
import { REPO_ROOT } from "./shell.ts";

const SHOWN = 15;

export default async function* fileTimes(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const byFile = new Map<string, number>();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { data } = event;
    if (data.nesting !== 0 || data.file === undefined) continue;
    byFile.set(data.file, (byFile.get(data.file) ?? 0) + data.details.duration_ms);
  }
  await recordFileTimes(new Map([...byFile].map(([file, ms]) => [relative(REPO_ROOT, file), ms]))).catch((err: unknown) => {
    process.stderr.write(`could not record the test files' times: ${err instanceof Error ? err.message : String(err)}\n`);
  });
  const total = [...byFile.values()].reduce((a, b) => a + b, 0);
  const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, SHOWN);
  yield `\nslowest test files (${byFile.size} files, ${(total / 1000).toFixed(0)} s of tests in all):\n`;
  for (const [file, ms] of slowest) yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${relative(REPO_ROOT, file)}\n`;
}
