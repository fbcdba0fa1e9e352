/**
 * A TLS handshake with every broker before a service's first Kafka client connects (issue #19):
 * kafkajs counts a certificate it does not trust as a connection error and retries it for about
 * 10 s before failing with a generic "Connection error". A certificate problem is not mended by
 * retrying, so a service checks first and stops at once with the reason.
 */
import net from "node:net";
import tls from "node:tls";
import { type KafkaSettings, tlsOptions } from "./kafka.ts";

/** Node's codes for a certificate the client does not accept (unknown CA, host name, dates). */
const CERTIFICATE_CODES = /CERT|SIGNATURE|ISSUER|^ERR_TLS_CERT_ALTNAME_INVALID$/;

/** A broker presented a certificate this client does not trust; retrying would not help. */
export class KafkaCertificateError extends Error {
  override readonly name = "KafkaCertificateError";
  constructor(
    /** `host:port: CODE: reason` for each broker that failed. */
    readonly failures: readonly string[],
    options?: ErrorOptions,
  ) {
    super(
      `Kafka TLS: the broker certificate is not trusted (${failures.join("; ")}); check KAFKA_SSL_CA_FILE (the CA that signed the brokers' certificates) and KAFKA_SSL_SERVERNAME`,
      options,
    );
  }
}

/** The certificate problem of one broker (`CODE: reason`), or undefined (trusted, or not reachable: kafkajs retries those). */
function handshake(broker: string, options: tls.ConnectionOptions, timeoutMs: number): Promise<{ broker: string; problem?: string; err?: Error }> {
  const cut = broker.lastIndexOf(":");
  const host = broker.slice(0, cut).replace(/^\[|\]$/g, "");
  const port = Number(broker.slice(cut + 1));
  return new Promise((resolve) => {
    const socket = tls.connect({ host, port, ...(net.isIP(host) ? {} : { servername: host }), ...options });
    const done = (problem?: string, err?: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ broker, ...(problem === undefined ? {} : { problem }), ...(err === undefined ? {} : { err }) });
    };
    const timer = setTimeout(() => done(), timeoutMs);
    socket.once("secureConnect", () => done());
    socket.once("error", (err: NodeJS.ErrnoException) => {
      const code = err.code ?? "";
      done(CERTIFICATE_CODES.test(code) ? `${code}: ${err.message}` : undefined, err);
    });
  });
}

/**
 * With TLS on and certificates checked, handshakes with every broker at once.
 * @throws KafkaCertificateError naming each broker whose certificate was refused, and why
 */
export async function checkKafkaCertificates(settings: KafkaSettings): Promise<void> {
  if (!settings.ssl || settings.tls?.rejectUnauthorized === false) return;
  const options = settings.tls ? tlsOptions(settings.tls) : {};
  const results = await Promise.all(settings.brokers.map((b) => handshake(b, options, settings.connectionTimeoutMs)));
  const refused = results.filter((r) => r.problem !== undefined);
  if (refused.length > 0)
    throw new KafkaCertificateError(
      refused.map((r) => `${r.broker}: ${r.problem}`),
      { cause: refused[0]?.err },
    );
}
