/**
 * The broker a benchmark runs against: `KAFKA_BROKERS` when set, else a scratch broker started
 * here (and set in `KAFKA_BROKERS` for the clusters the run starts). Interrupted (SIGINT,
 * SIGTERM), the run stops what it started — its current cluster, then its scratch broker — and
 * exits 130.
 * @returns the scratch broker to stop at the end, or undefined when one was given
 */
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import type { TestCluster } from "../harness/cluster.ts";

export async function benchBroker(
  log: (msg: string) => void,
  currentCluster: () => TestCluster | undefined = () => undefined,
): Promise<ScratchBroker | undefined> {
  let broker: ScratchBroker | undefined;
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping this run's cluster and broker`);
      void Promise.allSettled([currentCluster()?.stop()])
        .then(() => broker?.stop())
        .finally(() => process.exit(130));
    });
  }
  if (!process.env["KAFKA_BROKERS"]) {
    broker = await startScratchBroker();
    process.env["KAFKA_BROKERS"] = broker.brokers;
  }
  return broker;
}
