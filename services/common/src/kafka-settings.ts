import { readFileSync } from "node:fs";
import type { EnvReader } from "./env-config.ts";
import type { KafkaSaslSettings, KafkaSettings, KafkaTlsSettings } from "./kafka.ts";

const MECHANISMS = ["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"] as const;

/**
 * Reads the Kafka client settings every service shares (`KAFKA_*`), TLS and SASL included.
 * Secrets come from the environment or from files (`*_FILE`), never from the command line; files
 * are read here, once, so a missing or unreadable one fails the start with the others' problems,
 * except the OAUTHBEARER token file, which is read again on every authentication (rotation).
 */
export function readKafkaSettings(env: EnvReader, clientId: string): KafkaSettings {
  const tls = readTls(env);
  const sasl = readSasl(env);
  return {
    brokers: env.list("KAFKA_BROKERS", ["127.0.0.1:9092"]),
    clientId,
    ssl: tls !== undefined,
    ...(tls ? { tls } : {}),
    ...(sasl ? { sasl } : {}),
    connectionTimeoutMs: env.int("KAFKA_CONNECTION_TIMEOUT_MS", 1_000, { min: 100 }),
    requestTimeoutMs: env.int("KAFKA_REQUEST_TIMEOUT_MS", 5_000, { min: 100 }),
  };
}

function readTls(env: EnvReader): KafkaTlsSettings | undefined {
  const on = env.bool("KAFKA_SSL", false);
  const caFile = env.optionalString("KAFKA_SSL_CA_FILE");
  const certFile = env.optionalString("KAFKA_SSL_CERT_FILE");
  const keyFile = env.optionalString("KAFKA_SSL_KEY_FILE");
  const servername = env.optionalString("KAFKA_SSL_SERVERNAME");
  const rejectUnauthorized = env.bool("KAFKA_SSL_REJECT_UNAUTHORIZED", true);
  const rejectSet = env.optionalString("KAFKA_SSL_REJECT_UNAUTHORIZED") !== undefined;
  if (!on) {
    const stray = (
      [
        ["KAFKA_SSL_CA_FILE", caFile],
        ["KAFKA_SSL_CERT_FILE", certFile],
        ["KAFKA_SSL_KEY_FILE", keyFile],
        ["KAFKA_SSL_SERVERNAME", servername],
        ["KAFKA_SSL_REJECT_UNAUTHORIZED", rejectSet ? "set" : undefined],
      ] as const
    ).filter(([, v]) => v !== undefined);
    if (stray.length > 0) env.problem(`${stray.map(([n]) => n).join(", ")} set but KAFKA_SSL is off: set KAFKA_SSL=true to use TLS`);
    return undefined;
  }
  if ((certFile === undefined) !== (keyFile === undefined)) {
    env.problem("KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE must be set together (a client certificate and its private key)");
  }
  const ca = caFile === undefined ? undefined : readPem(env, "KAFKA_SSL_CA_FILE", caFile, "CERTIFICATE");
  const cert = certFile === undefined ? undefined : readPem(env, "KAFKA_SSL_CERT_FILE", certFile, "CERTIFICATE");
  const key = keyFile === undefined ? undefined : readPem(env, "KAFKA_SSL_KEY_FILE", keyFile, "PRIVATE KEY");
  return {
    rejectUnauthorized,
    ...(ca !== undefined ? { ca } : {}),
    ...(cert !== undefined && key !== undefined ? { cert, key } : {}),
    ...(servername !== undefined ? { servername } : {}),
  };
}

function readSasl(env: EnvReader): KafkaSaslSettings | undefined {
  const mechanismSet = env.optionalString("KAFKA_SASL_MECHANISM") !== undefined;
  const mechanism = env.oneOf("KAFKA_SASL_MECHANISM", MECHANISMS, "plain");
  const username = env.optionalString("KAFKA_SASL_USERNAME");
  const password = env.optionalString("KAFKA_SASL_PASSWORD");
  const passwordFile = env.optionalString("KAFKA_SASL_PASSWORD_FILE");
  const token = env.optionalString("KAFKA_SASL_OAUTHBEARER_TOKEN");
  const tokenFile = env.optionalString("KAFKA_SASL_OAUTHBEARER_TOKEN_FILE");
  if (mechanism === "oauthbearer") {
    if (username !== undefined || password !== undefined || passwordFile !== undefined) {
      env.problem("KAFKA_SASL_MECHANISM=oauthbearer takes a token, not KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD(_FILE)");
    }
    if ((token === undefined) === (tokenFile === undefined)) {
      env.problem("KAFKA_SASL_MECHANISM=oauthbearer needs exactly one of KAFKA_SASL_OAUTHBEARER_TOKEN and KAFKA_SASL_OAUTHBEARER_TOKEN_FILE");
      return undefined;
    }
    if (tokenFile !== undefined) {
      if (readSecret(env, "KAFKA_SASL_OAUTHBEARER_TOKEN_FILE", tokenFile) === undefined) return undefined;
      return { mechanism, tokenFile };
    }
    return { mechanism, token: token! };
  }
  if (token !== undefined || tokenFile !== undefined) {
    env.problem(`KAFKA_SASL_OAUTHBEARER_TOKEN(_FILE) set but KAFKA_SASL_MECHANISM is ${mechanismSet ? mechanism : "unset"}: set it to oauthbearer`);
  }
  if (password !== undefined && passwordFile !== undefined) {
    env.problem("KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE are both set: keep one");
    return undefined;
  }
  const secret = passwordFile !== undefined ? readSecret(env, "KAFKA_SASL_PASSWORD_FILE", passwordFile) : password;
  const hasPassword = password !== undefined || passwordFile !== undefined;
  if (username === undefined && !hasPassword) {
    if (mechanismSet) env.problem(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE)`);
    return undefined;
  }
  if (username === undefined || !hasPassword) {
    env.problem("KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE) must be set together");
    return undefined;
  }
  return secret === undefined ? undefined : { mechanism, username, password: secret };
}

/** A secret file's content, trailing newline dropped; a problem when unreadable or empty. */
export function readSecret(env: EnvReader, name: string, path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8").replace(/\r?\n$/, "");
  } catch (err) {
    env.problem(`${name}=${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    return undefined;
  }
  if (text.trim() === "") {
    env.problem(`${name}=${path}: the file is empty`);
    return undefined;
  }
  return text;
}

function readPem(env: EnvReader, name: string, path: string, kind: string): string | undefined {
  const text = readSecret(env, name, path);
  if (text === undefined) return undefined;
  if (!new RegExp(`-----BEGIN [A-Z ]*${kind}-----`).test(text)) {
    env.problem(`${name}=${path}: expected a PEM ${kind.toLowerCase()} (-----BEGIN ...${kind}-----)`);
    return undefined;
  }
  return text;
}
