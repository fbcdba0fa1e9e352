/**
 * Whether the cluster answers, for a readiness probe: every bootstrap broker is asked for its API
 * versions at once, over a connection kept between pings, each bounded by the ping's own timeout.
 * One silent broker (cut off, not refusing) costs its own timeout and hides none of the others, so
 * a cluster that lost one broker of three still counts as reachable.
 */
import { apiVersionsV4, type Connection } from "@platformatic/kafka";
import { openConnection, splitHostPort } from "./cluster.ts";
import type { KafkaSecurityOptions } from "./security.ts";

export interface BrokerPingOptions {
  readonly brokers: readonly string[];
  readonly clientId?: string;
  readonly security?: KafkaSecurityOptions;
}

/** What one ping found. */
export interface PingResult {
  /** Bootstrap brokers that answered within the timeout. */
  readonly answered: number;
  readonly asked: number;
  /** Why the last broker that did not answer failed (a timeout, a refused connection, a certificate). */
  readonly lastError?: Error;
}

export interface BrokerPing {
  ping(timeoutMs: number): Promise<PingResult>;
  close(): Promise<void>;
}

export function createBrokerPing(opts: BrokerPingOptions): BrokerPing {
  if (opts.brokers.length === 0) throw new RangeError("at least one bootstrap broker is needed");
  const addresses = opts.brokers.map(splitHostPort);
  const clientId = opts.clientId ?? "kafka-share-ping";
  const connections = new Map<number, Promise<Connection>>();

  function forget(i: number): void {
    const pending = connections.get(i);
    connections.delete(i);
    // A silent peer never answers a close: drop the socket.
    pending?.then((c) => c.socket?.destroy()).catch(() => {});
  }

  async function ask(i: number, timeoutMs: number): Promise<void> {
    let pending = connections.get(i);
    if (!pending) {
      const [host, port] = addresses[i]!;
      pending = openConnection(host, port, {
        clientId,
        connectTimeoutMs: timeoutMs,
        requestTimeoutMs: timeoutMs,
        ...(opts.security ? { security: opts.security } : {}),
      });
      connections.set(i, pending);
    }
    const conn = await pending;
    if (!conn.isConnected()) throw new Error("connection closed");
    await apiVersionsV4.api.async(conn, clientId, "0.1.0");
  }

  return {
    async ping(timeoutMs) {
      let lastError: Error | undefined;
      const outcomes = await Promise.all(
        addresses.map(async (_, i) => {
          let timer: NodeJS.Timeout | undefined;
          const timeout = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
          });
          try {
            await Promise.race([ask(i, timeoutMs), timeout]);
            return true;
          } catch (err) {
            lastError = err instanceof Error ? err : new Error(String(err));
            forget(i);
            return false;
          } finally {
            clearTimeout(timer);
          }
        }),
      );
      const answered = outcomes.filter(Boolean).length;
      return { answered, asked: addresses.length, ...(lastError ? { lastError } : {}) };
    },
    async close() {
      for (const i of [...connections.keys()]) {
        const pending = connections.get(i)!;
        connections.delete(i);
        const conn = await pending.catch(() => undefined);
        await conn?.close().catch(() => {});
      }
    },
  };
}
