import { createLogger, startTracing } from "@shoal/common";
import { createGatewayApp } from "./app.ts";
import { loadGatewayConfig } from "./config.ts";

const logger = createLogger("shoal-gateway");
const config = loadGatewayConfig();
const tracing = startTracing("shoal-gateway", config.instanceId);
const app = createGatewayApp(config, logger);
const FORCE_EXIT_MS = 30_000;

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    logger.info({ signal }, "stopping");
    setTimeout(() => process.exit(1), FORCE_EXIT_MS).unref();
    app.stop().then(
      () => tracing.shutdown().then(() => process.exit(0)),
      (err: unknown) => {
        logger.error({ err }, "stop failed");
        process.exit(1);
      },
    );
  });
}

app.start().catch((err: unknown) => {
  logger.fatal({ err }, "gateway failed to start");
  process.exit(1);
});
