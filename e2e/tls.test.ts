import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, writeCatalog, type TestCluster } from "./harness/cluster.ts";
import { selfSignedCert } from "@shoal/common/self-signed";
import { ServiceProcess } from "./harness/service-process.ts";

/** A self-signed certificate for localhost / 127.0.0.1 (its own CA). */
const selfSigned = (dir: string, name: string): { cert: string; key: string } => selfSignedCert(dir, name, "DNS:localhost,IP:127.0.0.1");

let opensslMissing: string | false = false;
try {
  execFileSync("openssl", ["version"], { stdio: "ignore" });
} catch {
  opensslMissing = "the openssl CLI is needed to make a test certificate";
}

// A machine without openssl must not pass this file by skipping it: infra/dev/setup-system.sh installs it.
test("the openssl CLI is installed (infra/dev/setup-system.sh installs it)", () => {
  if (opensslMissing !== false) assert.fail(`${opensslMissing}: run infra/dev/setup-system.sh`);
});

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  return assert.fail("expected the call to fail");
}

describe("TLS: one HTTPS port, ALPN h2 + http/1.1 (real gateway, worker and broker)", { skip: opensslMissing }, () => {
  const dir = mkdtempSync(join(tmpdir(), "shoal-e2e-tls-"));
  let cluster: TestCluster;
  let ca: Buffer;
  let httpsUrl: string;
  let plainUrl: string;
  let model: string;
  before(async () => {
    const pair = selfSigned(dir, "gateway");
    ca = readFileSync(pair.cert);
    cluster = await startCluster({ gatewayEnv: { SHOAL_TLS_CERT_FILE: pair.cert, SHOAL_TLS_KEY_FILE: pair.key } });
    plainUrl = cluster.urls[0]!;
    httpsUrl = plainUrl.replace("http://", "https://");
    model = cluster.modelIds[0]!;
    assert.equal(cluster.gateways[0]!.logs.find((l) => l.msg === "gateway serving")?.["tls"], true);
  });
  after(async () => {
    await cluster?.stop();
  });

  test("Connect (binary and JSON) over HTTPS/1.1 and gRPC over h2, with the CA trusted", async () => {
    for (const useBinaryFormat of [true, false]) {
      const connect = createClient(InferenceService, createConnectTransport({ baseUrl: httpsUrl, httpVersion: "1.1", useBinaryFormat, nodeOptions: { ca } }));
      const res = await connect.embed({ model, inputs: ["over https/1.1"] });
      assert.equal(res.embeddings.length, 1);
    }
    const grpc = createClient(InferenceService, createGrpcTransport({ baseUrl: httpsUrl, nodeOptions: { ca } }));
    const res = await grpc.embed({ model, inputs: ["over h2", "with tls"] });
    assert.equal(res.embeddings.length, 2);
    // Connect over h2 too (ALPN picks it).
    const connectH2 = createClient(InferenceService, createConnectTransport({ baseUrl: httpsUrl, httpVersion: "2", nodeOptions: { ca } }));
    assert.equal((await connectH2.embed({ model, inputs: ["connect over h2"] })).embeddings.length, 1);
  });

  test("plain HTTP routes answer over HTTPS too", async () => {
    const status = await new Promise<number>((ok, fail) => {
      https
        .get(`${httpsUrl}/readyz`, { ca }, (res) => {
          res.resume();
          ok(res.statusCode ?? 0);
        })
        .on("error", fail);
    });
    assert.equal(status, 200);
  });

  test("plain-text clients (HTTP/1.1 and h2c) and clients that do not trust the CA are refused", async () => {
    const h1 = await failure(
      createClient(InferenceService, createConnectTransport({ baseUrl: plainUrl, httpVersion: "1.1" })).embed({ model, inputs: ["plain"] }),
    );
    // The handshake fails: which code a client makes of a cut connection is its business.
    assert.notEqual(h1.code, Code.Unauthenticated);
    const h2c = await failure(createClient(InferenceService, createGrpcTransport({ baseUrl: plainUrl })).embed({ model, inputs: ["plain"] }));
    assert.notEqual(h2c.code, Code.Unauthenticated);
    console.error(`refused: plain HTTP/1.1 -> ${Code[h1.code]} (${h1.rawMessage}); h2c -> ${Code[h2c.code]} (${h2c.rawMessage})`);
    const untrusted = await failure(createClient(InferenceService, createGrpcTransport({ baseUrl: httpsUrl })).embed({ model, inputs: ["who are you"] }));
    assert.match(untrusted.rawMessage, /self.signed|certificate/i);
    await assert.rejects(fetch(`${plainUrl}/healthz`));
    // The server is unharmed.
    const grpc = createClient(InferenceService, createGrpcTransport({ baseUrl: httpsUrl, nodeOptions: { ca } }));
    assert.equal((await grpc.embed({ model, inputs: ["still serving"] })).embeddings.length, 1);
  });

  test("a half-configured TLS setup is refused at start, with every problem at once", async () => {
    const { path } = await writeCatalog(["tiny"], 1);
    const gw = ServiceProcess.start("gateway", "tls-misconfigured", {
      SHOAL_CATALOG: path,
      SHOAL_PORT: "0",
      SHOAL_TLS_CERT_FILE: join(dir, "gateway.crt"),
      SHOAL_API_KEYS: "acme=short",
    });
    const code = await gw.exited;
    assert.notEqual(code, 0);
    const text = gw.logs.map((l) => l.msg).join("\n");
    assert.match(text, /SHOAL_TLS_CERT_FILE and SHOAL_TLS_KEY_FILE: set both/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.key: expected at least 16 characters/);
  });
});
