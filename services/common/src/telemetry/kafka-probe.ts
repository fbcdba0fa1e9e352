/** Tracks whether the Kafka cluster answers, for readiness. */
export interface KafkaProbe {
  readonly reachable: boolean;
  start(): void;
  stop(): void;
}

/** What one check found: how many brokers answered, and why the last one that did not failed. */
export interface ProbeCheck {
  readonly answered: number;
  readonly lastError?: Error;
}

/**
 * Runs `check` every `intervalMs` (each bounded by `timeoutMs`), so readiness flips within seconds
 * when the cluster goes away and back when it returns; reachable while any broker answers. `check`
 * should ask every bootstrap broker on connections of its own (a service's shared client queues
 * behind a silent broker): @shoal/kafka-share's createBrokerPing does.
 */
export function createKafkaProbe(
  check: (timeoutMs: number) => Promise<ProbeCheck>,
  opts: { intervalMs: number; timeoutMs: number; onChange?: (reachable: boolean, reason?: string) => void },
): KafkaProbe {
  let reachable = true;
  let timer: NodeJS.Timeout | undefined;
  let running = false;

  async function tick(): Promise<void> {
    let result: ProbeCheck;
    let t: NodeJS.Timeout | undefined;
    const late = new Promise<ProbeCheck>((resolve) => {
      t = setTimeout(() => resolve({ answered: 0, lastError: new Error(`no answer within ${opts.timeoutMs} ms`) }), opts.timeoutMs + 100);
    });
    try {
      result = await Promise.race([check(opts.timeoutMs), late]);
    } catch (err) {
      result = { answered: 0, lastError: err instanceof Error ? err : new Error(String(err)) };
    } finally {
      clearTimeout(t);
    }
    const ok = result.answered > 0;
    if (ok !== reachable) {
      reachable = ok;
      opts.onChange?.(ok, result.lastError?.message);
    }
    if (running) timer = setTimeout(() => void tick(), opts.intervalMs);
  }

  return {
    get reachable() {
      return reachable;
    },
    start() {
      if (running) return;
      running = true;
      timer = setTimeout(() => void tick(), opts.intervalMs);
    },
    stop() {
      running = false;
      clearTimeout(timer);
    },
  };
}
