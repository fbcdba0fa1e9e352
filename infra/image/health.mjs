// `shoal health`: asks this container's service whether it is ready (GET /readyz) and exits 0 if
// so, 1 otherwise. The worker answers on SHOAL_HTTP_PORT (default 9464), the gateway on SHOAL_PORT
// (default 8080; HTTPS when SHOAL_TLS_CERT_FILE is set, its certificate not checked: this is the
// container asking itself). A gateway is recognised by SHOAL_POOL being unset.
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

const worker = process.env.SHOAL_POOL !== undefined;
const port = Number(worker ? (process.env.SHOAL_HTTP_PORT ?? 9464) : (process.env.SHOAL_PORT ?? 8080));
const tls = !worker && Boolean(process.env.SHOAL_TLS_CERT_FILE);
const req = (tls ? httpsRequest : httpRequest)({ host: "127.0.0.1", port, path: "/readyz", timeout: 2000, rejectUnauthorized: false }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on("timeout", () => req.destroy(new Error("timed out")));
req.on("error", (err) => {
  process.stderr.write(`shoal health: ${err.message}\n`);
  process.exit(1);
});
req.end();
