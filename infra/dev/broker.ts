import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KAFKA_SH, mustRun, run, step } from "./shell.ts";

/** A throwaway Kafka broker for one test or benchmark run. */
export interface ScratchBroker {
  readonly brokers: string;
  stop(): Promise<void>;
}

/** Starts a broker on `port` with a fresh data folder; `stop()` stops it and removes the folder. */
export async function startScratchBroker(port: string): Promise<ScratchBroker> {
  step(`scratch Kafka broker on 127.0.0.1:${port}`);
  const dataDir = await mkdtemp(join(tmpdir(), "shoal-kafka-"));
  const env = { ...process.env, KAFKA_PORT: port, KAFKA_DATA_DIR: dataDir };
  await mustRun("bash", [KAFKA_SH, "start"], { env });
  return {
    brokers: `127.0.0.1:${port}`,
    async stop() {
      step(`stopping the scratch broker on ${port}`);
      await run("bash", [KAFKA_SH, "stop"], { env });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
