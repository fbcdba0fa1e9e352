import assert from "node:assert/strict";
import { test } from "node:test";
import { parseChaosArgs } from "./args.ts";
import { FAULT_KIND_NAMES } from "./fault-kinds.ts";

test("chaos args: defaults, values in both spellings, and every problem at once", () => {
  assert.deepEqual(parseChaosArgs([]), {
    seed: 1,
    minutes: 3,
    faults: FAULT_KIND_NAMES,
    schedulePath: undefined,
    ratePerS: 8,
    deadlineMs: 10_000,
    startTimeoutS: 180,
  });
  const a = parseChaosArgs(["--seed", "42", "--minutes=0.5", "--faults", "kill-worker,cut-host", "--schedule", "s.json"]);
  assert.ok(a !== "help");
  assert.equal(a.seed, 42);
  assert.equal(a.minutes, 0.5);
  assert.deepEqual(a.faults, ["kill-worker", "cut-host"]);
  assert.equal(a.schedulePath, "s.json");
  assert.equal(parseChaosArgs(["--seed", "1", "--help"]), "help");
  const b = parseChaosArgs(["--faults", "model-load-fail,worker-memory-limit,move-coordinator"]);
  assert.ok(b !== "help");
  assert.deepEqual(b.faults, ["model-load-fail", "worker-memory-limit", "move-coordinator"]);
  assert.throws(
    () => parseChaosArgs(["--seed", "x", "--minutes", "0", "--bogus", "--faults", "fire", "--rate"]),
    (err: Error) =>
      /--seed: expected a whole number/.test(err.message) &&
      /--minutes: expected minutes/.test(err.message) &&
      /unknown option '--bogus'/.test(err.message) &&
      /unknown fault kind 'fire'/.test(err.message) &&
      /--rate: expected a value/.test(err.message) &&
      /usage: npm run chaos/.test(err.message),
  );
});
