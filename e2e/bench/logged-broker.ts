/**
 * A scratch broker that writes its request log (kafka.request.logger at DEBUG) to a file of the
 * run's: every request it completes, when, from which client, how long it took and where the time
 * went (`bench:requests`, `bench:lone-call`).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { REPO_ROOT } from "../../infra/dev/shell.ts";

export interface LoggedBroker {
  readonly brokers: string;
  /** The request log so far. */
  read(): Promise<string>;
  stop(): Promise<void>;
}

export async function startLoggedBroker(): Promise<LoggedBroker> {
  const dir = await mkdtemp(join(tmpdir(), "shoal-reqlog-"));
  const requestLog = join(dir, "requests.log");
  const extraConfig = join(dir, "request-log4j2.properties");
  await writeFile(
    extraConfig,
    [
      "appender.requests.type = File",
      "appender.requests.name = requestsLog",
      `appender.requests.fileName = ${requestLog}`,
      "appender.requests.layout.type = PatternLayout",
      "appender.requests.layout.pattern = [%d{yyyy-MM-dd HH:mm:ss,SSS}{UTC}] %m%n",
      "logger.request.name = kafka.request.logger",
      "logger.request.level = DEBUG",
      "logger.request.additivity = false",
      "logger.request.appenderRef.requests.ref = requestsLog",
      "",
    ].join("\n"),
  );
  const before = process.env["KAFKA_OPTS"];
  process.env["KAFKA_OPTS"] = `-Dlog4j2.configurationFile=${join(REPO_ROOT, "infra/kafka/log4j2.properties")},${extraConfig}`;
  let started: ScratchBroker;
  try {
    started = await startScratchBroker();
  } finally {
    if (before === undefined) delete process.env["KAFKA_OPTS"];
    else process.env["KAFKA_OPTS"] = before;
  }
  return {
    brokers: started.brokers,
    read: () => readFile(requestLog, "utf8"),
    async stop() {
      await started.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
