import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freeBrokerPort } from "./broker.ts";
import { KAFKA_SH, mustRun, portIsFree, run, step } from "./shell.ts";
import { makeTestPki, type TestPki } from "./test-pki.ts";

/**
 * A throwaway broker with secured listeners beside its PLAINTEXT one (kept for kafka.sh's
 * readiness probe and the controller): `saslSsl`, SASL over TLS with SCRAM-SHA-512,
 * SCRAM-SHA-256, PLAIN and OAUTHBEARER (unsecured JWS tokens: for tests only), and `mtls`, TLS
 * that requires a client certificate signed by the test CA. All on 127.0.0.1.
 */
export interface SecureBroker {
  /** The PLAINTEXT listener (admin set-up in tests). */
  readonly plaintext: string;
  readonly saslSsl: string;
  readonly mtls: string;
  readonly pki: TestPki;
  /** A SCRAM user (SCRAM-SHA-512 and SCRAM-SHA-256 credentials) and a PLAIN one. */
  readonly scram: { readonly username: string; readonly password: string };
  readonly plain: { readonly username: string; readonly password: string };
  /** A folder for the test's own files (secret files), removed by stop(). */
  readonly dir: string;
  stop(): Promise<void>;
}

async function freePort(exclude: readonly number[]): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 30_000 + Math.floor(Math.random() * 10_000);
    if (!exclude.includes(port) && (await portIsFree(port))) return port;
  }
  throw new Error("no free port for a secured listener");
}

/** An unsecured JWS (alg none), as Kafka's OAuthBearerUnsecuredJws takes: for test brokers only. */
export function unsecuredJwt(subject: string, lifetimeS = 3_600): string {
  const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  return `${b64({ alg: "none" })}.${b64({ sub: subject, iat: now, exp: now + lifetimeS, scope: "kafka" })}.`;
}

/** Starts a secured scratch broker; `stop()` stops it and removes its data, certificates and secrets. */
export async function startSecureBroker(): Promise<SecureBroker> {
  const port = Number(await freeBrokerPort());
  const saslPort = await freePort([port, port + 1]);
  const mtlsPort = await freePort([port, port + 1, saslPort]);
  const root = await mkdtemp(join(tmpdir(), "shoal-kafka-secure-"));
  const dataDir = join(root, "data");
  const pki = makeTestPki(root);
  const scram = { username: "shoal", password: randomBytes(12).toString("base64url") };
  const plain = { username: "plainuser", password: randomBytes(12).toString("base64url") };
  const extra = join(root, "secure.properties");
  const prefix = "listener.name.sasl_ssl";
  await writeFile(
    extra,
    [
      `listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${port + 1},SASL_SSL://127.0.0.1:${saslPort},MTLS://127.0.0.1:${mtlsPort}`,
      `advertised.listeners=PLAINTEXT://127.0.0.1:${port},SASL_SSL://127.0.0.1:${saslPort},MTLS://127.0.0.1:${mtlsPort}`,
      "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
      "ssl.keystore.type=PEM",
      `ssl.keystore.location=${pki.serverPemFile}`,
      "ssl.truststore.type=PEM",
      `ssl.truststore.location=${pki.caFile}`,
      "listener.name.mtls.ssl.client.auth=required",
      "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER",
      `${prefix}.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER`,
      `${prefix}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;`,
      `${prefix}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;`,
      `${prefix}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${plain.username}="${plain.password}";`,
      // Unsecured JWS tokens (alg none), validated for shape, lifetime and scope only: tests only.
      `${prefix}.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
      `${prefix}.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler`,
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  const credentials = join(root, "scram.txt");
  await writeFile(credentials, ["SCRAM-SHA-512", "SCRAM-SHA-256"].map((m) => `${m}=[name=${scram.username},password=${scram.password}]`).join("\n"), {
    mode: 0o600,
  });
  step(`secured scratch Kafka broker: PLAINTEXT ${port}, SASL_SSL ${saslPort}, mTLS ${mtlsPort}`);
  const env = { ...process.env, KAFKA_PORT: String(port), KAFKA_DATA_DIR: dataDir, KAFKA_EXTRA_PROPERTIES: extra, KAFKA_SCRAM_CREDENTIALS: credentials };
  try {
    await mustRun("bash", [KAFKA_SH, "start"], { env });
  } catch (err) {
    await run("bash", [KAFKA_SH, "stop"], { env });
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  return {
    plaintext: `127.0.0.1:${port}`,
    saslSsl: `127.0.0.1:${saslPort}`,
    mtls: `127.0.0.1:${mtlsPort}`,
    pki,
    scram,
    plain,
    dir: root,
    async stop() {
      step(`stopping the secured scratch broker on ${port}`);
      await run("bash", [KAFKA_SH, "stop"], { env });
      await rm(root, { recursive: true, force: true });
    },
  };
}
