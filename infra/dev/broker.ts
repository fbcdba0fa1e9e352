import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KAFKA_SH, mustRun, portIsFree, run, step } from "./shell.ts";

/** A throwaway Kafka broker for one test or benchmark run. */
export interface ScratchBroker {
  readonly brokers: string;
  /** Stops the broker, keeping its data (for outage tests); `resume()` starts it again. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A port whose next port (the controller's) is free too, so several test runs (or a dev cluster
 * on 9092) can share the machine.
 */
export async function freeBrokerPort(): Promise<string> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + 2 * Math.floor(Math.random() * 4_000);
    if ((await portIsFree(port)) && (await portIsFree(port + 1))) return String(port);
  }
  throw new Error("no free port pair found for a scratch Kafka broker");
}

/**
 * Starts a broker on `port` (default: a free one) with a fresh data folder; `stop()` stops it and
 * removes the folder.
 */
export async function startScratchBroker(requested?: string): Promise<ScratchBroker> {
  const port = requested ?? (await freeBrokerPort());
  step(`scratch Kafka broker on 127.0.0.1:${port}`);
  const dataDir = await mkdtemp(join(tmpdir(), "shoal-kafka-"));
  const env = { ...process.env, KAFKA_PORT: port, KAFKA_DATA_DIR: dataDir };
  await mustRun("bash", [KAFKA_SH, "start"], { env });
  return {
    brokers: `127.0.0.1:${port}`,
    async pause() {
      await mustRun("bash", [KAFKA_SH, "stop"], { env });
    },
    async resume() {
      await mustRun("bash", [KAFKA_SH, "start"], { env });
    },
    async stop() {
      step(`stopping the scratch broker on ${port}`);
      await run("bash", [KAFKA_SH, "stop"], { env });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
