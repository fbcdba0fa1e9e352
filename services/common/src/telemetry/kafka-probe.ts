import type { Admin } from "kafkajs";

/** Tracks whether the Kafka cluster answers, for readiness. */
export interface KafkaProbe {
  readonly reachable: boolean;
  start(): void;
  stop(): void;
}

/**
 * Asks the cluster for its metadata every `intervalMs` (bounded by `timeoutMs`), so readiness
 * flips within seconds when the broker goes away and back when it returns.
 */
export function createKafkaProbe(admin: Admin, opts: { intervalMs: number; timeoutMs: number; onChange?: (reachable: boolean) => void }): KafkaProbe {
  let reachable = true;
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  async function check(): Promise<void> {
    let ok = false;
    let t: NodeJS.Timeout | undefined;
    try {
      await Promise.race([admin.describeCluster(), new Promise((_, reject) => (t = setTimeout(() => reject(new Error("timeout")), opts.timeoutMs)))]);
      ok = true;
    } catch {
      ok = false;
    } finally {
      clearTimeout(t);
    }
    if (ok !== reachable) {
      reachable = ok;
      opts.onChange?.(ok);
    }
    if (running) timer = setTimeout(() => void check(), opts.intervalMs);
  }

  return {
    get reachable() {
      return reachable;
    },
    start() {
      if (running) return;
      running = true;
      timer = setTimeout(() => void check(), opts.intervalMs);
    },
    stop() {
      running = false;
      clearTimeout(timer);
    },
  };
}
