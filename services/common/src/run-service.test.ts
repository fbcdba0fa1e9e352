import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { describe, test } from "node:test";
import { createLogger } from "./logger.ts";
import { forceExitAfterMs, stopSteps } from "./run-service.ts";

const FIXTURE = resolve(import.meta.dirname, "run-service.fixture.ts");

interface Run {
  /** Resolves once the fixture printed `mark`. */
  marked(mark: string): Promise<void>;
  signal(sig: NodeJS.Signals): void;
  exited: Promise<{ code: number | null; marks: string[]; logs: Array<Record<string, unknown>>; ms: number }>;
}

/** Starts the fixture service on this (the pinned) node binary. */
function runFixture(env: Record<string, string>): Run {
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE], {
    env: { ...process.env, LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const marks: string[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let buffered = "";
  let signalledAt = 0;
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split("\n");
    buffered = lines.pop() ?? "";
    for (const line of lines) {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (typeof parsed["mark"] === "string") marks.push(parsed["mark"]);
      else logs.push(parsed);
      for (const w of waiters.splice(0)) w();
    }
  });
  return {
    async marked(mark) {
      while (!marks.includes(mark)) await new Promise<void>((r) => waiters.push(r));
    },
    signal(sig) {
      signalledAt ||= performance.now();
      child.kill(sig);
    },
    exited: new Promise((r) => child.once("close", (code) => r({ code, marks, logs, ms: performance.now() - signalledAt }))),
  };
}

describe("runService: one lifecycle for every service (a real child process, real signals)", () => {
  test("SIGTERM: every stop step in order, tracing flushed last, exit 0", async () => {
    const run = runFixture({ FIXTURE_MODE: "clean" });
    await run.marked("started");
    run.signal("SIGTERM");
    const { code, marks, logs } = await run.exited;
    assert.equal(code, 0);
    assert.deepEqual(marks, ["started", "drain", "close consumer", "close producer", "flush tracing"]);
    assert.ok(logs.some((l) => l["msg"] === "stopping" && l["signal"] === "SIGTERM" && l["forceExitAfterMs"] === 10_200));
  });

  test("a step that throws: the later steps and the flush still run; exit 1", async () => {
    const run = runFixture({ FIXTURE_MODE: "failing-step" });
    await run.marked("started");
    run.signal("SIGINT");
    const { code, marks, logs } = await run.exited;
    assert.equal(code, 1);
    assert.deepEqual(marks, ["started", "drain", "close consumer", "close producer", "flush tracing"]);
    assert.ok(
      logs.some((l) => l["step"] === "close consumer" && l["level"] === "error"),
      "the failed step is logged by name",
    );
    assert.ok(logs.some((l) => l["msg"] === "stop failed"));
  });

  test("a second signal while stopping exits at once with 1", async () => {
    const run = runFixture({ FIXTURE_MODE: "hang" });
    await run.marked("started");
    run.signal("SIGTERM");
    await run.marked("drain");
    run.signal("SIGTERM");
    const { code, marks, logs } = await run.exited;
    assert.equal(code, 1);
    assert.deepEqual(marks, ["started", "drain"]);
    assert.ok(logs.some((l) => l["msg"] === "second stop signal: exiting now"));
  });

  test("a stop that hangs is cut at drain grace + margin, exit 1", async () => {
    const run = runFixture({ FIXTURE_MODE: "hang", FIXTURE_GRACE_MS: "100", FIXTURE_MARGIN_MS: "400" });
    await run.marked("started");
    run.signal("SIGTERM");
    const { code, logs, ms } = await run.exited;
    assert.equal(code, 1);
    assert.ok(ms >= 450, `exited after ${ms.toFixed(0)} ms`);
    assert.ok(logs.some((l) => l["msg"] === "stop did not finish in time: exiting" && l["forceExitAfterMs"] === 500));
  });

  test("invalid configuration: logged, exit 1, nothing started", async () => {
    const { code, marks, logs } = await runFixture({ FIXTURE_MODE: "bad-config" }).exited;
    assert.equal(code, 1);
    assert.deepEqual(marks, []);
    assert.ok(logs.some((l) => String(l["msg"]).startsWith("invalid configuration") && l["level"] === "fatal"));
  });

  test("the force-exit deadline follows the drain grace", () => {
    assert.equal(forceExitAfterMs(20_000), 35_000);
    assert.equal(forceExitAfterMs(10_000, 5_000), 15_000);
  });
});

describe("stopSteps", () => {
  test("runs every step in order, then throws one AggregateError naming the failed ones", async () => {
    const ran: string[] = [];
    const boom = new Error("boom");
    await assert.rejects(
      stopSteps(createLogger("test", "silent"), [
        ["a", () => void ran.push("a")],
        [
          "b",
          async () => {
            ran.push("b");
            throw boom;
          },
        ],
        ["c", () => void ran.push("c")],
        [
          "d",
          () => {
            ran.push("d");
            throw new Error("again");
          },
        ],
      ]),
      (err: unknown) => {
        assert.ok(err instanceof AggregateError);
        assert.equal(err.message, "stop: b, d failed");
        assert.equal(err.errors[0], boom);
        return true;
      },
    );
    assert.deepEqual(ran, ["a", "b", "c", "d"]);
  });

  test("resolves when every step succeeds", async () => {
    await stopSteps(createLogger("test", "silent"), [["only", async () => undefined]]);
  });
});
