import net from "node:net";
import tls from "node:tls";
import { Kafka, logLevel, type ISocketFactory, type KafkaConfig, type LogEntry, type SASLOptions } from "kafkajs";
import type { Logger } from "./logger.ts";

/** Connection settings shared by every Kafka client of a service. */
export interface KafkaSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly ssl: boolean;
  readonly sasl?: { mechanism: "plain" | "scram-sha-256" | "scram-sha-512"; username: string; password: string };
  /** How long a connection attempt may take before the client gives up on a broker. */
  readonly connectionTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

const levelNames: Record<number, "error" | "warn" | "info" | "debug"> = {
  [logLevel.ERROR]: "error",
  [logLevel.WARN]: "warn",
  [logLevel.INFO]: "info",
  [logLevel.DEBUG]: "debug",
};

/**
 * kafkajs' own socket factory, plus TCP_NODELAY: without it Nagle's algorithm holds small requests
 * (a heartbeat behind a fetch, a lone produce) until the previous segment is acknowledged, which
 * showed up as multi-millisecond stalls on the request path.
 */
const noDelaySocketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
  const socket = ssl
    ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }), ...(typeof ssl === "object" ? ssl : {}) }, onConnect)
    : net.connect({ host, port }, onConnect);
  socket.setKeepAlive(true, 60_000);
  socket.setNoDelay(true);
  return socket;
};

/**
 * Builds a kafkajs client whose own logs go through the service's pino logger.
 * kafkajs logs every retried connection at ERROR; those are demoted to WARN so a broker
 * restart does not read like a crash.
 */
export function createKafka(settings: KafkaSettings, logger: Logger): Kafka {
  const log = logger.child({ component: "kafkajs" });
  const config: KafkaConfig = {
    clientId: settings.clientId,
    brokers: [...settings.brokers],
    ssl: settings.ssl,
    connectionTimeout: settings.connectionTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 8 },
    socketFactory: noDelaySocketFactory,
    logLevel: logLevel.WARN,
    logCreator:
      () =>
      ({ level, log: entry }: LogEntry) => {
        const { message, ...rest } = entry;
        const name = levelNames[level] ?? "info";
        const demoted = name === "error" && /connect|ECONNREFUSED|Connection/i.test(String(message));
        log[demoted ? "warn" : name]({ kafka: rest }, String(message));
      },
  };
  if (settings.sasl) config.sasl = settings.sasl as SASLOptions;
  return new Kafka(config);
}
