import type { AddressInfo, Server } from "node:net";

/** Starts `server` listening; resolves with its address, rejects when it cannot listen (port taken). */
export function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** What `closeGracefully` needs of a server with open connections. */
export interface OpenConnections {
  readonly server: Server;
  /** Every open connection; each one leaves the set when it closes. */
  readonly sockets: ReadonlySet<{ destroy(): void }>;
  /** HTTP/2 sessions, told to GOAWAY at once. */
  readonly sessions: Iterable<{ close(): void }>;
  /** Cuts the connections that are idle now (HTTP/1.1 has no GOAWAY). */
  readonly cutIdle: () => void;
}

/**
 * Stops accepting, lets open requests finish for `graceMs`, cutting connections as they go idle,
 * then destroys what is left; resolves once the server has closed.
 */
export async function closeGracefully(open: OpenConnections, graceMs = 2_000): Promise<void> {
  const closed = new Promise<void>((resolve) => open.server.close(() => resolve()));
  for (const session of open.sessions) session.close();
  const deadline = Date.now() + graceMs;
  open.cutIdle();
  while (open.sockets.size > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    open.cutIdle();
  }
  for (const socket of open.sockets) socket.destroy();
  await closed;
}
