import { readFile } from "node:fs/promises";
import net from "node:net";
import tls from "node:tls";
import { Kafka, logLevel, type ISocketFactory, type KafkaConfig, type LogEntry, type SASLOptions } from "kafkajs";
import { stopKafkajsIdleLoop } from "./kafkajs-idle-loop.ts";
import { useNativeKafkajsCrc } from "./kafkajs-native-crc.ts";
import type { Logger } from "./logger.ts";

/** TLS to the brokers: PEM contents, read from the `KAFKA_SSL_*_FILE`s at start. */
export interface KafkaTlsSettings {
  /** CA certificate(s) to trust instead of Node's bundled roots. */
  readonly ca?: string;
  /** Client certificate and key, for listeners with `ssl.client.auth=required` (mTLS). */
  readonly cert?: string;
  readonly key?: string;
  /** The name the broker certificates are checked against instead of the broker's host. */
  readonly servername?: string;
  readonly rejectUnauthorized: boolean;
}

/** SASL: a user and password (PLAIN, SCRAM), or an OAUTHBEARER token (static, or a file read on each authentication). */
export type KafkaSaslSettings =
  | { readonly mechanism: "plain" | "scram-sha-256" | "scram-sha-512"; readonly username: string; readonly password: string }
  | { readonly mechanism: "oauthbearer"; readonly token: string }
  | { readonly mechanism: "oauthbearer"; readonly tokenFile: string };

/** Connection settings shared by every Kafka client of a service. */
export interface KafkaSettings {
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** TLS on (KAFKA_SSL); `tls` then holds its details. */
  readonly ssl: boolean;
  readonly tls?: KafkaTlsSettings;
  readonly sasl?: KafkaSaslSettings;
  /** How long a connection attempt may take before the client gives up on a broker. */
  readonly connectionTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

/** The OAUTHBEARER token now: the static one, or the token file read afresh (it may have been rotated). */
export async function oauthBearerToken(sasl: Extract<KafkaSaslSettings, { mechanism: "oauthbearer" }>): Promise<string> {
  if ("token" in sasl) return sasl.token;
  const text = (await readFile(sasl.tokenFile, "utf8")).trim();
  if (text === "") throw new Error(`KAFKA_SASL_OAUTHBEARER_TOKEN_FILE=${sasl.tokenFile} is empty`);
  return text;
}

/** Node TLS options for `tls` (kafkajs' `ssl`, kafka-share's `security.tls`). */
export function tlsOptions(tls: KafkaTlsSettings): tls.ConnectionOptions {
  return {
    rejectUnauthorized: tls.rejectUnauthorized,
    ...(tls.ca !== undefined ? { ca: tls.ca } : {}),
    ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
    ...(tls.key !== undefined ? { key: tls.key } : {}),
    ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
  };
}

/**
 * The same settings in @shoal/kafka-share's `security` shape (structurally: common does not depend
 * on it), so the share-group clients connect exactly as the kafkajs ones do.
 */
export function shareSecurity(settings: KafkaSettings):
  | {
      tls?: { ca?: string; cert?: string; key?: string; servername?: string; rejectUnauthorized: boolean };
      sasl?:
        | { mechanism: "plain" | "scram-sha-256" | "scram-sha-512"; username: string; password: string }
        | { mechanism: "oauthbearer"; token: () => Promise<string> };
    }
  | undefined {
  if (!settings.tls && !settings.sasl) return undefined;
  const sasl = settings.sasl;
  return {
    ...(settings.tls ? { tls: { ...settings.tls } } : {}),
    ...(sasl
      ? {
          sasl:
            sasl.mechanism === "oauthbearer"
              ? { mechanism: "oauthbearer" as const, token: () => oauthBearerToken(sasl) }
              : { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password },
        }
      : {}),
  };
}

/** kafkajs' `sasl` for the settings' SASL (an OAUTHBEARER provider called on each authentication). */
function kafkajsSasl(sasl: KafkaSaslSettings): SASLOptions {
  if (sasl.mechanism === "oauthbearer") return { mechanism: "oauthbearer", oauthBearerProvider: async () => ({ value: await oauthBearerToken(sasl) }) };
  return { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password } as SASLOptions;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]|::1)(:\d+)?$/;

/**
 * What is exposed on the way to the brokers, as warnings: plaintext traffic off loopback, and a
 * PLAIN password sent without TLS anywhere (SCRAM and OAUTHBEARER do not send a password).
 */
export function kafkaExposure(settings: KafkaSettings): string[] {
  const out: string[] = [];
  const remote = settings.brokers.some((b) => !LOOPBACK.test(b));
  if (!settings.tls && settings.sasl?.mechanism === "plain") out.push("SASL PLAIN without KAFKA_SSL sends the Kafka password in clear");
  else if (!settings.tls && remote) out.push("Kafka brokers are off loopback and KAFKA_SSL is off: jobs and results cross the network unencrypted");
  return out;
}

const levelNames: Record<number, "error" | "warn" | "info" | "debug"> = {
  [logLevel.ERROR]: "error",
  [logLevel.WARN]: "warn",
  [logLevel.INFO]: "info",
  [logLevel.DEBUG]: "debug",
};

/**
 * kafkajs' own socket factory, plus two changes:
 * - TCP_NODELAY: without it Nagle's algorithm holds small requests (a heartbeat behind a fetch, a
 *   lone produce) until the previous segment is acknowledged, which showed up as multi-millisecond
 *   stalls on the request path;
 * - a connect that kafkajs gives up on is destroyed. On its connection timeout kafkajs calls
 *   `end()`, which waits for the connect to finish; to a broker whose packets are dropped (a network
 *   partition) that is the kernel's SYN retries, about 127 s, each an open socket, and a process
 *   cannot exit before they end (e2e/silent-leader.test.ts's process outlived its tests by 120 s).
 */
export const kafkaSocketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
  const socket = ssl
    ? tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }), ...(typeof ssl === "object" ? ssl : {}) }, onConnect)
    : net.connect({ host, port }, onConnect);
  socket.setKeepAlive(true, 60_000);
  socket.setNoDelay(true);
  const end = socket.end.bind(socket);
  socket.end = ((...args: Parameters<typeof end>) => (socket.connecting ? socket.destroy() : end(...args))) as typeof socket.end;
  return socket;
};

/**
 * Builds a kafkajs client whose own logs go through the service's pino logger.
 * kafkajs logs every retried connection at ERROR; those are demoted to WARN so a broker
 * restart does not read like a crash. The first call also patches kafkajs for the whole process:
 * no idle timer loop (kafkajs-idle-loop.ts), native record batch CRCs (kafkajs-native-crc.ts).
 */
export function createKafka(settings: KafkaSettings, logger: Logger): Kafka {
  stopKafkajsIdleLoop();
  useNativeKafkajsCrc();
  const log = logger.child({ component: "kafkajs" });
  for (const warning of kafkaExposure(settings)) logger.warn({ brokers: settings.brokers }, warning);
  const config: KafkaConfig = {
    clientId: settings.clientId,
    brokers: [...settings.brokers],
    ssl: settings.tls ? tlsOptions(settings.tls) : settings.ssl,
    connectionTimeout: settings.connectionTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    retry: { initialRetryTime: 100, maxRetryTime: 2_000, retries: 8 },
    socketFactory: kafkaSocketFactory,
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
  if (settings.sasl) config.sasl = kafkajsSasl(settings.sasl);
  return new Kafka(config);
}
