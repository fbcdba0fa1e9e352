import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { after, before, describe, test } from "node:test";
import type { KafkaSettings } from "./kafka.ts";
import { checkKafkaCertificates, KafkaCertificateError } from "./kafka-tls-check.ts";
import { selfSignedCert } from "./self-signed.ts";

describe("Kafka certificate check (a real TLS server with a self-signed certificate)", () => {
  let dir: string;
  let server: tls.Server;
  let broker: string;
  let ca: string;
  let stranger: string;
  const settings = (brokers: string[], over: Partial<NonNullable<KafkaSettings["tls"]>> = {}): KafkaSettings => ({
    brokers,
    clientId: "t",
    ssl: true,
    tls: { ca, rejectUnauthorized: true, ...over },
    connectionTimeoutMs: 2_000,
    requestTimeoutMs: 2_000,
  });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "shoal-tls-check-"));
    const own = selfSignedCert(dir, "broker", "DNS:localhost,IP:127.0.0.1");
    ca = readFileSync(own.cert, "utf8");
    stranger = readFileSync(selfSignedCert(dir, "stranger", "DNS:localhost").cert, "utf8");
    server = tls.createServer({ cert: ca, key: readFileSync(own.key) }, (s) => s.end());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    broker = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the signing CA passes; a stranger CA fails with the broker, Node's code and a hint", async () => {
    await checkKafkaCertificates(settings([broker]));
    const err = await checkKafkaCertificates(settings([broker], { ca: stranger })).then(
      () => assert.fail("accepted"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof KafkaCertificateError);
    assert.equal(err.failures.length, 1);
    assert.match(err.failures[0]!, new RegExp(`^${broker.replaceAll(".", "\\.")}: DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate`));
    assert.match(err.message, /^Kafka TLS: the broker certificate is not trusted \(127\.0\.0\.1:\d+: [A-Z_]+: .+\); check KAFKA_SSL_CA_FILE/);
  });

  test("a name the certificate does not carry fails with ERR_TLS_CERT_ALTNAME_INVALID", async () => {
    const err = await checkKafkaCertificates(settings([broker], { servername: "kafka.example.org" })).catch((e: unknown) => e);
    assert.ok(err instanceof KafkaCertificateError);
    assert.match(err.message, /ERR_TLS_CERT_ALTNAME_INVALID/);
  });

  test("not checked: TLS off, or certificate checks off; an unreachable broker is left to the client's retries", async () => {
    await checkKafkaCertificates({ ...settings([broker], { ca: stranger }), ssl: false });
    await checkKafkaCertificates(settings([broker], { ca: stranger, rejectUnauthorized: false }));
    const closed = tls.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const gone = `127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((r) => closed.close(r));
    await checkKafkaCertificates(settings([gone]));
  });
});
