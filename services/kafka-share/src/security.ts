/**
 * TLS and SASL for the share consumer's connections. The handshake itself is @platformatic/kafka's
 * Connection (node:tls; SaslHandshake v1 + SaslAuthenticate, PLAIN, SCRAM-SHA-256/512 with the
 * server signature checked, OAUTHBEARER): this module maps the library's options onto it and sorts
 * the failures that retrying cannot mend (a refused password, an untrusted certificate) into
 * {@link KafkaSecurityError}s.
 */
import type { ConnectionOptions as TlsConnectOptions } from "node:tls";
import type { ConnectionOptions } from "@platformatic/kafka";
import { KafkaAuthenticationError, KafkaTlsError } from "./errors.ts";

/** A secret given as a value or read on each authentication (a token file that is rotated). */
export type SecretSource = string | (() => string | Promise<string>);

/** TLS to the brokers (Kafka's SSL / SASL_SSL listeners). */
export interface KafkaTlsOptions {
  /** PEM CA certificate(s) to trust instead of Node's bundled roots. */
  readonly ca?: string | Buffer;
  /** PEM client certificate and its key, for listeners with `ssl.client.auth=required`. */
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  /** The name to check the broker's certificate against (and send as SNI) instead of its host. */
  readonly servername?: string;
  /** Default true. false accepts any certificate: for development only. */
  readonly rejectUnauthorized?: boolean;
}

/** SASL on every connection, before any other request. */
export type KafkaSaslOptions =
  | { readonly mechanism: "plain" | "scram-sha-256" | "scram-sha-512"; readonly username: string; readonly password: SecretSource }
  /** RFC 7628: `n,,\x01auth=Bearer <token>\x01\x01`. A function is called on each authentication. */
  | { readonly mechanism: "oauthbearer"; readonly token: SecretSource };

export interface KafkaSecurityOptions {
  readonly tls?: KafkaTlsOptions;
  readonly sasl?: KafkaSaslOptions;
}

const MECHANISMS = { plain: "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512", oauthbearer: "OAUTHBEARER" } as const;

/** The Connection options for `security` (none for a plaintext, unauthenticated cluster). */
export function connectionSecurity(security: KafkaSecurityOptions | undefined): Pick<ConnectionOptions, "tls" | "tlsServerName" | "sasl"> {
  const out: Pick<ConnectionOptions, "tls" | "tlsServerName" | "sasl"> = {};
  const t = security?.tls;
  if (t) {
    const tls: TlsConnectOptions = { rejectUnauthorized: t.rejectUnauthorized ?? true };
    if (t.ca !== undefined) tls.ca = t.ca;
    if (t.cert !== undefined) tls.cert = t.cert;
    if (t.key !== undefined) tls.key = t.key;
    out.tls = tls;
    if (t.servername !== undefined) out.tlsServerName = t.servername;
  }
  const s = security?.sasl;
  if (s) {
    out.sasl =
      s.mechanism === "oauthbearer"
        ? { mechanism: MECHANISMS.oauthbearer, token: s.token, authBytesValidator: oauthBearerVerdict }
        : { mechanism: MECHANISMS[s.mechanism], username: s.username, password: s.password };
  }
  return out;
}

/**
 * RFC 7628 §3.2.2: a broker that refuses a token answers SaslAuthenticate without an error code
 * but with a JSON challenge (`{"status":"invalid_token"}`); success is an empty answer. Without
 * this check the connection would count as authenticated and fail on its first real request.
 */
function oauthBearerVerdict(authBytes: Buffer, callback: (error: Error | null, bytes?: Buffer) => void): void {
  if (authBytes.length === 0) return callback(null, authBytes);
  let status = "unreadable challenge";
  try {
    const parsed = JSON.parse(authBytes.toString("utf8")) as { status?: unknown };
    status = typeof parsed.status === "string" ? parsed.status : JSON.stringify(parsed);
  } catch {
    // not JSON: say so
  }
  callback(Object.assign(new Error(`the broker refused the OAUTHBEARER token (${status})`), { code: "PLT_KFK_AUTHENTICATION" }));
}

/** Node's codes for a certificate the client would not accept (or a TLS handshake that failed). */
const TLS_CODES = /CERT|SIGNATURE|ISSUER|^ERR_TLS_|^ERR_SSL_|^EPROTO$/;

/**
 * The non-retriable error inside a connection failure, if there is one: SASL refused (wrong
 * password, unknown user, bad token, mechanism not enabled) or the broker's certificate not trusted.
 */
export function securityFailure(err: unknown, broker: string): KafkaAuthenticationError | KafkaTlsError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof KafkaAuthenticationError || e instanceof KafkaTlsError) return e;
    const code = (e as { code?: unknown }).code;
    if (code === "PLT_KFK_AUTHENTICATION") return new KafkaAuthenticationError(broker, brokerReason(e) ?? deepest(e).message, { cause: err });
    // Platformatic's check of the first bytes of a plaintext connection's answer.
    if (e.message === "Broker requires TLS.")
      return new KafkaTlsError(broker, "the listener speaks TLS and this client does not (turn TLS on)", { cause: err });
    if (typeof code === "string" && TLS_CODES.test(code)) return new KafkaTlsError(broker, `${code}: ${e.message}`, { cause: err });
  }
  return undefined;
}

/** The last error of a cause chain: the most specific message. */
function deepest(err: Error): Error {
  let e = err;
  for (let depth = 0; e.cause instanceof Error && depth < 8; depth++) e = e.cause;
  return e;
}

/** The broker's own words (SaslAuthenticate's ErrorMessage) somewhere in a cause chain. */
function brokerReason(err: Error): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const nested = (e as { errors?: unknown }).errors;
    for (const n of Array.isArray(nested) ? nested : []) {
      const said = (n as { serverErrorMessage?: unknown }).serverErrorMessage;
      if (typeof said === "string" && said !== "") return said;
    }
  }
  return undefined;
}
