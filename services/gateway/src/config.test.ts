import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { ConfigError } from "@shoal/common";
import { selfSignedCert } from "@shoal/common/self-signed";
import { hashApiKey } from "./api-keys.ts";
import { loadGatewayConfig } from "./config.ts";

const dir = mkdtempSync(join(tmpdir(), "shoal-gw-config-"));
const BASE = { SHOAL_CATALOG: join(dir, "catalog.yaml") };

function problems(env: Record<string, string>): string {
  try {
    loadGatewayConfig({ ...BASE, ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems.join("\n");
  }
  return assert.fail("expected a ConfigError");
}

/** A self-signed certificate and its key, made by the openssl CLI. */
const selfSigned = (name: string): { cert: string; key: string } => selfSignedCert(dir, name);

let hasOpenssl = true;
try {
  execFileSync("openssl", ["version"], { stdio: "ignore" });
} catch {
  hasOpenssl = false;
}

describe("gateway configuration: API keys and TLS", () => {
  test("API keys from the env var and a YAML file are merged; only hashes are kept", () => {
    const file = join(dir, "keys.yaml");
    writeFileSync(file, `keys:\n  - tenant: acme\n    key: sk-acme-0123456789abcdef\n    models: [m1]\n    requestsPerSecond: 5\n`);
    const config = loadGatewayConfig({ ...BASE, SHOAL_API_KEYS: "ops=sk-ops-0123456789abcdef;lane=batch", SHOAL_API_KEYS_FILE: file });
    assert.deepEqual(
      config.apiKeys.map((k) => k.tenant),
      ["ops", "acme"],
    );
    assert.deepEqual(config.apiKeys[1]!.sha256, hashApiKey("sk-acme-0123456789abcdef"));
    assert.equal(JSON.stringify(config).includes("sk-acme"), false);
    assert.equal(loadGatewayConfig(BASE).apiKeys.length, 0);
    // JSON is YAML too.
    const json = join(dir, "keys.json");
    writeFileSync(json, JSON.stringify({ keys: [{ tenant: "j", key: "sk-json-0123456789abcdef", models: "*" }] }));
    assert.equal(loadGatewayConfig({ ...BASE, SHOAL_API_KEYS_FILE: json }).apiKeys[0]!.tenant, "j");
  });

  test("every problem at once: a missing TLS key file, an unreadable keys file, a bad inline key", () => {
    const text = problems({
      SHOAL_TLS_CERT_FILE: join(dir, "nope.crt"),
      SHOAL_API_KEYS_FILE: join(dir, "missing.yaml"),
      SHOAL_API_KEYS: "acme=tooshort",
      SHOAL_PORT: "x",
    });
    assert.match(text, /SHOAL_TLS_CERT_FILE and SHOAL_TLS_KEY_FILE: set both/);
    assert.match(text, /SHOAL_TLS_CERT_FILE=.*nope.crt: cannot read \(ENOENT\)/);
    assert.match(text, /SHOAL_API_KEYS_FILE=.*missing.yaml: cannot read \(ENOENT\)/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.key: expected at least 16 characters/);
    assert.match(text, /SHOAL_PORT=x: expected an integer/);
  });

  test("TLS: a matching pair loads; garbage, a mismatched key and YAML errors are reported", { skip: !hasOpenssl && "openssl CLI not found" }, () => {
    const a = selfSigned("a");
    const b = selfSigned("b");
    const ok = loadGatewayConfig({ ...BASE, SHOAL_TLS_CERT_FILE: a.cert, SHOAL_TLS_KEY_FILE: a.key });
    assert.match(ok.tls!.cert.toString(), /BEGIN CERTIFICATE/);
    const garbage = join(dir, "garbage.pem");
    writeFileSync(garbage, "not pem");
    const badYaml = join(dir, "bad.yaml");
    writeFileSync(badYaml, "keys: [\n");
    assert.match(problems({ SHOAL_TLS_CERT_FILE: a.cert, SHOAL_TLS_KEY_FILE: b.key }), /SHOAL_TLS_KEY_FILE=.*b.key: does not match the certificate/);
    const text = problems({ SHOAL_TLS_CERT_FILE: garbage, SHOAL_TLS_KEY_FILE: garbage, SHOAL_API_KEYS_FILE: badYaml });
    assert.match(text, /SHOAL_TLS_CERT_FILE=.*garbage.pem: not a PEM certificate/);
    assert.match(text, /SHOAL_TLS_KEY_FILE=.*garbage.pem: not an unencrypted PEM private key/);
    assert.match(text, /SHOAL_API_KEYS_FILE=.*bad.yaml: not valid YAML or JSON/);
  });
});

describe("direct replies (SHOAL_DIRECT_REPLY*)", () => {
  test("on by default, on loopback and any free port, result streams taken; off with SHOAL_DIRECT_REPLY=0; the advertised address must be host:port", () => {
    assert.deepEqual(loadGatewayConfig(BASE).directReply, { host: "127.0.0.1", port: 0, advertise: undefined, streams: true });
    assert.equal(loadGatewayConfig({ ...BASE, SHOAL_DIRECT_REPLY_STREAMS: "0" }).directReply?.streams, false);
    assert.equal(loadGatewayConfig({ ...BASE, SHOAL_DIRECT_REPLY: "0" }).directReply, undefined);
    assert.deepEqual(
      loadGatewayConfig({ ...BASE, SHOAL_DIRECT_REPLY_HOST: "10.0.0.5", SHOAL_DIRECT_REPLY_PORT: "7070", SHOAL_DIRECT_REPLY_ADVERTISE: "gw-0.shoal:7070" })
        .directReply,
      { host: "10.0.0.5", port: 7070, advertise: "gw-0.shoal:7070", streams: true },
    );
    assert.match(problems({ SHOAL_DIRECT_REPLY_ADVERTISE: "http://gw-0/x" }), /SHOAL_DIRECT_REPLY_ADVERTISE must be host:port/);
    assert.match(problems({ SHOAL_DIRECT_REPLY_PORT: "70000" }), /SHOAL_DIRECT_REPLY_PORT=70000/);
  });
});

describe("embedding cache (SHOAL_EMBED_CACHE_*)", () => {
  test("256 MiB by default, dynamic-int8 models left out; sizes in bytes or units; 0 turns it off; garbage is a problem", () => {
    assert.deepEqual(loadGatewayConfig(BASE).embedCache, { maxBytes: 256 * 1024 * 1024, batchDependentModels: false });
    assert.deepEqual(loadGatewayConfig({ ...BASE, SHOAL_EMBED_CACHE_BYTES: "64MiB", SHOAL_EMBED_CACHE_QUANTIZED: "1" }).embedCache, {
      maxBytes: 64 * 1024 * 1024,
      batchDependentModels: true,
    });
    assert.equal(loadGatewayConfig({ ...BASE, SHOAL_EMBED_CACHE_BYTES: "1000000" }).embedCache.maxBytes, 1_000_000);
    assert.equal(loadGatewayConfig({ ...BASE, SHOAL_EMBED_CACHE_BYTES: "0" }).embedCache.maxBytes, 0);
    assert.match(problems({ SHOAL_EMBED_CACHE_BYTES: "lots" }), /SHOAL_EMBED_CACHE_BYTES: expected a size/);
  });
});
