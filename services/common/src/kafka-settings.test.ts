import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ConfigError, EnvReader } from "./env-config.ts";
import { kafkaExposure, oauthBearerToken, shareSecurity } from "./kafka.ts";
import { readKafkaSettings } from "./kafka-settings.ts";

const dir = mkdtempSync(join(tmpdir(), "kafka-settings-"));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const PEM_CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const PEM_KEY = "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n";

function read(env: Record<string, string>) {
  const r = new EnvReader(env);
  const settings = readKafkaSettings(r, "test");
  return r.done({ settings }).settings;
}

function problems(env: Record<string, string>): readonly string[] {
  try {
    read(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  assert.fail("expected a ConfigError");
}

test("defaults: plaintext, no SASL", () => {
  const s = read({});
  assert.equal(s.ssl, false);
  assert.equal(s.tls, undefined);
  assert.equal(s.sasl, undefined);
  assert.equal(shareSecurity(s), undefined);
});

test("TLS with a CA and a client certificate reads the PEM files; reject-unauthorized stays on", () => {
  const s = read({
    KAFKA_SSL: "true",
    KAFKA_SSL_CA_FILE: file("ca.crt", PEM_CERT),
    KAFKA_SSL_CERT_FILE: file("c.crt", PEM_CERT),
    KAFKA_SSL_KEY_FILE: file("c.key", PEM_KEY),
    KAFKA_SSL_SERVERNAME: "kafka.internal",
  });
  const [cert, key] = [PEM_CERT.trimEnd(), PEM_KEY.trimEnd()]; // one trailing newline dropped, as for every secret file
  assert.deepEqual(s.tls, { rejectUnauthorized: true, ca: cert, cert, key, servername: "kafka.internal" });
  assert.equal(s.ssl, true);
  assert.equal(read({ KAFKA_SSL: "1", KAFKA_SSL_REJECT_UNAUTHORIZED: "false" }).tls?.rejectUnauthorized, false);
});

test("TLS problems: files without KAFKA_SSL, half a client certificate, unreadable or non-PEM files", () => {
  assert.deepEqual(problems({ KAFKA_SSL_CA_FILE: file("ca2.crt", PEM_CERT) }), ["KAFKA_SSL_CA_FILE set but KAFKA_SSL is off: set KAFKA_SSL=true to use TLS"]);
  assert.match(
    problems({ KAFKA_SSL: "true", KAFKA_SSL_CERT_FILE: file("c2.crt", PEM_CERT) })[0]!,
    /KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE must be set together/,
  );
  const all = problems({
    KAFKA_SSL: "true",
    KAFKA_SSL_CA_FILE: join(dir, "missing.crt"),
    KAFKA_SSL_CERT_FILE: file("k-as-cert", PEM_KEY),
    KAFKA_SSL_KEY_FILE: file("c-as-key", "hello"),
  });
  assert.equal(all.length, 3);
  assert.match(all[0]!, /KAFKA_SSL_CA_FILE=.*missing\.crt: cannot read it \(ENOENT\)/);
  assert.match(all[1]!, /KAFKA_SSL_CERT_FILE=.*: expected a PEM certificate/);
  assert.match(all[2]!, /KAFKA_SSL_KEY_FILE=.*: expected a PEM private key/);
});

test("SASL SCRAM with the password from a file (trailing newline dropped) or the environment", () => {
  const s = read({ KAFKA_SASL_MECHANISM: "scram-sha-512", KAFKA_SASL_USERNAME: "alice", KAFKA_SASL_PASSWORD_FILE: file("pw", "s3cret\n") });
  assert.deepEqual(s.sasl, { mechanism: "scram-sha-512", username: "alice", password: "s3cret" });
  assert.deepEqual(read({ KAFKA_SASL_USERNAME: "bob", KAFKA_SASL_PASSWORD: "pw" }).sasl, { mechanism: "plain", username: "bob", password: "pw" });
});

test("SASL problems: half credentials, both password sources, a mechanism without credentials, a token without oauthbearer", () => {
  assert.match(problems({ KAFKA_SASL_USERNAME: "a" })[0]!, /must be set together/);
  assert.match(problems({ KAFKA_SASL_USERNAME: "a", KAFKA_SASL_PASSWORD: "x", KAFKA_SASL_PASSWORD_FILE: file("pw2", "y") })[0]!, /both set: keep one/);
  assert.match(problems({ KAFKA_SASL_MECHANISM: "scram-sha-256" })[0]!, /needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/);
  assert.match(
    problems({ KAFKA_SASL_MECHANISM: "gssapi" })[0]!,
    /KAFKA_SASL_MECHANISM=gssapi: expected one of plain, scram-sha-256, scram-sha-512, oauthbearer/,
  );
  assert.match(problems({ KAFKA_SASL_OAUTHBEARER_TOKEN: "t" })[0]!, /set it to oauthbearer/);
  assert.match(problems({ KAFKA_SASL_USERNAME: "a", KAFKA_SASL_PASSWORD_FILE: file("empty", "\n") })[0]!, /the file is empty/);
});

test("OAUTHBEARER: exactly one token source; the token file is read again on each authentication", async () => {
  assert.match(problems({ KAFKA_SASL_MECHANISM: "oauthbearer" })[0]!, /exactly one of KAFKA_SASL_OAUTHBEARER_TOKEN and KAFKA_SASL_OAUTHBEARER_TOKEN_FILE/);
  assert.match(
    problems({ KAFKA_SASL_MECHANISM: "oauthbearer", KAFKA_SASL_OAUTHBEARER_TOKEN: "t", KAFKA_SASL_USERNAME: "u" })[0]!,
    /takes a token, not KAFKA_SASL_USERNAME/,
  );
  const tokenFile = file("token", "first\n");
  const s = read({ KAFKA_SSL: "true", KAFKA_SASL_MECHANISM: "oauthbearer", KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile });
  assert.deepEqual(s.sasl, { mechanism: "oauthbearer", tokenFile });
  const security = shareSecurity(s);
  assert.ok(security?.sasl?.mechanism === "oauthbearer");
  assert.equal(await security.sasl.token(), "first");
  writeFileSync(tokenFile, "rotated");
  assert.equal(await security.sasl.token(), "rotated");
  assert.equal(await oauthBearerToken({ mechanism: "oauthbearer", token: "static" }), "static");
});

test("exposure warnings: PLAIN without TLS anywhere, plaintext off loopback; none with TLS or on loopback", () => {
  assert.deepEqual(kafkaExposure(read({})), []);
  assert.deepEqual(kafkaExposure(read({ KAFKA_BROKERS: "kafka.internal:9092" })), [
    "Kafka brokers are off loopback and KAFKA_SSL is off: jobs and results cross the network unencrypted",
  ]);
  assert.deepEqual(kafkaExposure(read({ KAFKA_SASL_USERNAME: "u", KAFKA_SASL_PASSWORD: "p" })), [
    "SASL PLAIN without KAFKA_SSL sends the Kafka password in clear",
  ]);
  assert.deepEqual(kafkaExposure(read({ KAFKA_BROKERS: "kafka.internal:9093", KAFKA_SSL: "true", KAFKA_SASL_USERNAME: "u", KAFKA_SASL_PASSWORD: "p" })), []);
});
