import { createLogger, type Logger } from "./logger.ts";
import { startTracing, type Tracing } from "./telemetry/tracing.ts";

/** What a service's composition root returns. */
export interface ServiceApp {
  start(): Promise<unknown>;
  /** Idempotent graceful stop; rejects if any of its steps failed. */
  stop(): Promise<void>;
}

export interface RunServiceOptions<C> {
  /** `service` of the log lines and the trace resource: `shoal-gateway`, `shoal-worker`. */
  readonly service: string;
  /** Reads and validates the configuration (throws ConfigError listing every problem). */
  readonly loadConfig: () => C;
  /** The instance id of the trace resource. */
  readonly instanceId: (config: C) => string;
  /** How long in-flight work may take to finish once a stop signal came (the app drains that long). */
  readonly drainGraceMs: (config: C) => number;
  readonly createApp: (config: C, logger: Logger) => ServiceApp;
  /**
   * Time allowed past the drain grace for the rest of the stop (closing Kafka clients, flushing
   * telemetry) before the process exits anyway with code 1. Default 15 s.
   */
  readonly stopMarginMs?: number;
  /** Tracing for this process (default: `startTracing`, OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set). */
  readonly startTracing?: (service: string, instanceId: string) => Tracing;
}

/** Force-exit deadline after the first stop signal: the drain grace plus the stop margin. */
export function forceExitAfterMs(drainGraceMs: number, stopMarginMs = DEFAULT_STOP_MARGIN_MS): number {
  return drainGraceMs + stopMarginMs;
}

const DEFAULT_STOP_MARGIN_MS = 15_000;

/**
 * The lifecycle of every Shoal process: load the configuration, start tracing, build the app,
 * register SIGTERM/SIGINT, start. On the first signal the app stops (it drains for its grace), then
 * tracing is flushed — last, so the stop's own spans are exported — and the process exits 0, or 1
 * if any of that failed. A second signal, or the stop running past grace + margin, exits at once
 * with 1. A failed start exits 1.
 */
export function runService<C>(opts: RunServiceOptions<C>): void {
  const logger = createLogger(opts.service);
  let config: C;
  try {
    config = opts.loadConfig();
  } catch (err) {
    // Every problem in the line itself: it is what an operator reads first.
    logger.fatal({ err }, `invalid configuration: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
  const tracing = (opts.startTracing ?? startTracing)(opts.service, opts.instanceId(config));
  const app = opts.createApp(config, logger);
  const forceAfterMs = forceExitAfterMs(opts.drainGraceMs(config), opts.stopMarginMs);
  let stopping = false;

  async function stop(signal: NodeJS.Signals): Promise<number> {
    logger.info({ signal, forceExitAfterMs: forceAfterMs }, "stopping");
    let code = 0;
    try {
      await app.stop();
    } catch (err) {
      logger.error({ err }, "stop failed");
      code = 1;
    }
    try {
      await tracing.shutdown();
    } catch (err) {
      logger.error({ err }, "could not flush traces");
      code = 1;
    }
    return code;
  }

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (stopping) {
        logger.warn({ signal }, "second stop signal: exiting now");
        process.exit(1);
      }
      stopping = true;
      setTimeout(() => {
        logger.error({ forceExitAfterMs: forceAfterMs }, "stop did not finish in time: exiting");
        process.exit(1);
      }, forceAfterMs).unref();
      void stop(signal).then((code) => {
        if (code === 0) logger.info("stopped");
        process.exit(code);
      });
    });
  }

  app.start().catch((err: unknown) => {
    logger.fatal({ err }, `${opts.service} failed to start`);
    process.exit(1);
  });
}

/**
 * Runs every step of a stop in order, even when one fails: each failure is logged with its
 * step's name, and an AggregateError naming the failed steps is thrown once all have run.
 */
export async function stopSteps(log: Logger, steps: ReadonlyArray<readonly [name: string, step: () => unknown]>): Promise<void> {
  const failures: Array<{ name: string; err: unknown }> = [];
  for (const [name, step] of steps) {
    try {
      await step();
    } catch (err) {
      log.error({ err, step: name }, `stop step '${name}' failed`);
      failures.push({ name, err });
    }
  }
  if (failures.length > 0) {
    throw new AggregateError(
      failures.map((f) => f.err),
      `stop: ${failures.map((f) => f.name).join(", ")} failed`,
    );
  }
}
