import { createLogger, startTracing } from "@shoal/common";
import { createWorkerApp } from "./app.ts";
import { loadWorkerConfig } from "./config.ts";

const logger = createLogger("shoal-worker");
const config = loadWorkerConfig();
const tracing = startTracing("shoal-worker", config.workerId);
const app = createWorkerApp(config, logger);
const FORCE_EXIT_MS = 45_000;

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
  logger.fatal({ err }, "worker failed to start");
  process.exit(1);
});
