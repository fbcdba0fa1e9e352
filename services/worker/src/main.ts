import { runService } from "@shoal/common";
import { createWorkerApp } from "./app.ts";
import { loadWorkerConfig } from "./config.ts";

runService({
  service: "shoal-worker",
  loadConfig: () => loadWorkerConfig(),
  instanceId: (config) => config.workerId,
  drainGraceMs: (config) => config.drainGraceMs,
  createApp: createWorkerApp,
});
