import { runService } from "@shoal/common";
import { createGatewayApp } from "./app.ts";
import { loadGatewayConfig } from "./config.ts";

runService({
  service: "shoal-gateway",
  loadConfig: () => loadGatewayConfig(),
  instanceId: (config) => config.instanceId,
  drainGraceMs: (config) => config.drainGraceMs,
  createApp: createGatewayApp,
});
