import http from "node:http";
import { listenOn, type Registry } from "@shoal/common";

/** `/metrics`, `/healthz` (alive) and `/readyz` (ready) for orchestrators and Prometheus. */
export interface WorkerHttp {
  listen(port: number, host: string): Promise<number>;
  close(): Promise<void>;
}

export function createWorkerHttp(registry: Registry, ready: () => { ready: boolean; reason: string }): WorkerHttp {
  const server = http.createServer((req, res) => {
    const text = (status: number, body: string): void => {
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(body);
    };
    if (req.url === "/metrics") {
      registry.metrics().then(
        (body) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(body);
        },
        () => text(500, "metrics unavailable\n"),
      );
    } else if (req.url === "/healthz") text(200, "ok\n");
    else if (req.url === "/readyz") {
      const r = ready();
      text(r.ready ? 200 : 503, `${r.ready ? "ready" : "not ready"}: ${r.reason}\n`);
    } else text(404, "not found\n");
  });
  return {
    listen: async (port, host) => (await listenOn(server, port, host)).port,
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
