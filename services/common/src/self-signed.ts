import { execFileSync } from "node:child_process";
import { join } from "node:path";

/**
 * For tests: a self-signed EC certificate for `CN=localhost` and its key, written to `dir` as
 * `<name>.crt` / `<name>.key` by the openssl CLI (the certificate is its own CA). With
 * `san`, the subjectAltName (e.g. `DNS:localhost,IP:127.0.0.1`) that clients check.
 */
export function selfSignedCert(dir: string, name: string, san?: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const args = [
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
    "/CN=localhost",
  ];
  if (san !== undefined) args.push("-addext", `subjectAltName=${san}`);
  execFileSync("openssl", args, { stdio: "ignore" });
  return { cert, key };
}
