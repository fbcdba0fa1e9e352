import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** PEM files for TLS tests: a CA, a server and a client certificate it signed, and a stranger CA. */
export interface TestPki {
  /** The CA that signed `server` and `client`: what clients and the broker trust. */
  readonly caFile: string;
  /** `CN=localhost`, subjectAltName IP:127.0.0.1 and DNS:localhost. */
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  /** Certificate and key in one file (Kafka's PEM key store takes both together). */
  readonly serverPemFile: string;
  /** `CN=shoal-client`, for listeners with `ssl.client.auth=required`. */
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  /** A CA that signed nothing here: trusting only it must fail the handshake. */
  readonly strangerCaFile: string;
}

function openssl(args: readonly string[]): void {
  execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** A self-signed CA (P-256, two days) as `<name>.crt` / `<name>.key` in `dir`. */
function makeCa(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  openssl([
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    key,
    "-out",
    cert,
    "-days",
    "2",
    "-subj",
    `/CN=${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return { cert, key };
}

/** A leaf certificate signed by `ca` (PKCS#8 key, unencrypted, as Kafka's PEM store wants). */
function makeLeaf(dir: string, name: string, subject: string, ca: { cert: string; key: string }, extensions: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, extensions);
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr, "-subj", subject]);
  openssl(["x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext]);
  return { cert, key };
}

/** Writes a fresh test PKI into `dir` with the openssl CLI (about 0.1 s). */
export function makeTestPki(dir: string): TestPki {
  const ca = makeCa(dir, "shoal-test-ca");
  const stranger = makeCa(dir, "stranger-ca");
  const server = makeLeaf(dir, "server", "/CN=localhost", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
  const client = makeLeaf(dir, "client", "/CN=shoal-client", ca, "extendedKeyUsage=clientAuth\n");
  const serverPemFile = join(dir, "server.pem");
  writeFileSync(serverPemFile, execFileSync("cat", [server.key, server.cert]));
  return {
    caFile: ca.cert,
    serverCertFile: server.cert,
    serverKeyFile: server.key,
    serverPemFile,
    clientCertFile: client.cert,
    clientKeyFile: client.key,
    strangerCaFile: stranger.cert,
  };
}
