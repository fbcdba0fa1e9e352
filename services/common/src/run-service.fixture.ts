/**
 * A tiny service run by run-service.test.ts: its app's stop has three steps and prints a mark
 * for each (and for the tracing flush) on stdout. FIXTURE_MODE: `clean`, `failing-step` (the
 * second step throws), `hang` (the first step never ends), `bad-config`.
 */
import { runService, stopSteps } from "./run-service.ts";

const mode = process.env["FIXTURE_MODE"] ?? "clean";
const mark = (name: string): void => void process.stdout.write(`${JSON.stringify({ mark: name })}\n`);

runService({
  service: "run-service-fixture",
  loadConfig: () => {
    if (mode === "bad-config") throw new Error("FIXTURE: invalid");
    return { drainGraceMs: Number(process.env["FIXTURE_GRACE_MS"] ?? 200) };
  },
  instanceId: () => "fixture-1",
  drainGraceMs: (config) => config.drainGraceMs,
  stopMarginMs: Number(process.env["FIXTURE_MARGIN_MS"] ?? 10_000),
  startTracing: () => ({ enabled: true, shutdown: async () => mark("flush tracing") }),
  createApp: (_config, logger) => {
    let keepAlive: NodeJS.Timeout | undefined;
    return {
      async start() {
        keepAlive = setInterval(() => undefined, 60_000);
        mark("started");
      },
      stop: () =>
        stopSteps(logger, [
          [
            "drain",
            async () => {
              mark("drain");
              if (mode === "hang") await new Promise(() => undefined);
            },
          ],
          [
            "close consumer",
            () => {
              mark("close consumer");
              if (mode === "failing-step") throw new Error("the consumer would not close");
            },
          ],
          [
            "close producer",
            async () => {
              mark("close producer");
              clearInterval(keepAlive);
            },
          ],
        ]),
    };
  },
});
