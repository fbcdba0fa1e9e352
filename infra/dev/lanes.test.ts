import assert from "node:assert/strict";
import { test } from "node:test";
import { balanceLanes, FILE_START_MS, runLabelled, UNKNOWN_FILE_MS } from "./lanes.ts";

test("balanceLanes: longest first, each file to the lane with the least recorded time so far", () => {
  const times = new Map([
    ["e2e/a.test.ts", 130_000],
    ["e2e/b.test.ts", 120_000],
    ["e2e/c.test.ts", 80_000],
    ["e2e/d.test.ts", 70_000],
    ["e2e/e.test.ts", 10_000],
    ["e2e/gone.test.ts", 900_000],
  ]);
  const files = ["e2e/e.test.ts", "e2e/new.test.ts", "e2e/d.test.ts", "e2e/c.test.ts", "e2e/b.test.ts", "e2e/a.test.ts"];
  // Each plus FILE_START_MS (3 s): a 133 | b 123 | c 83 -> b (206) | d 73 -> a (206) | new 33 (unknown) -> a, the lower of the tie | e 13 -> b
  assert.deepEqual(balanceLanes(files, times, 2), [
    ["e2e/a.test.ts", "e2e/d.test.ts", "e2e/new.test.ts"],
    ["e2e/b.test.ts", "e2e/c.test.ts", "e2e/e.test.ts"],
  ]);
  assert.deepEqual([UNKNOWN_FILE_MS, FILE_START_MS], [30_000, 3_000]);
  assert.deepEqual(balanceLanes(files, times, 1), [["e2e/a.test.ts", "e2e/b.test.ts", "e2e/c.test.ts", "e2e/d.test.ts", "e2e/new.test.ts", "e2e/e.test.ts"]]);
  assert.deepEqual(balanceLanes(["e2e/x.test.ts"], new Map(), 3), [["e2e/x.test.ts"], [], []], "more lanes than files: the rest stay empty");
  assert.throws(() => balanceLanes(files, times, 0), RangeError);
});

test("runLabelled: every line of the child's output is prefixed with the label; resolves with its exit code", async (t) => {
  const written: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  t.mock.method(process.stdout, "write", (chunk: string | Uint8Array, ...rest: never[]) =>
    typeof chunk === "string" && chunk.startsWith("[lane x]") ? written.push(chunk) > 0 : write(chunk, ...rest),
  );
  const code = await runLabelled(
    "[lane x]",
    process.execPath,
    ["-e", "process.stdout.write('one\\ntwo\\n'); process.stdout.write('three'); process.exitCode = 3"],
    process.env,
  );
  assert.equal(code, 3);
  assert.deepEqual(written, ["[lane x] one\n", "[lane x] two\n", "[lane x] three\n"]);
});
