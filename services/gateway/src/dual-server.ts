import http from "node:http";
import http2 from "node:http2";
import net, { type AddressInfo, type Socket } from "node:net";
import { closeGracefully, listenOn } from "@shoal/common";

import type { Handler } from "./http-types.ts";
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from "./connection-limits.ts";
import { closeWhenIdle } from "./idle-sessions.ts";
import { guardStreamResets } from "./stream-reset-guard.ts";

/** One TCP port that speaks HTTP/1.1 (browsers, Connect JSON, gRPC-Web) and h2c (gRPC). */
export interface DualServer {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stops accepting, lets open requests finish, then closes idle connections. */
  close(): Promise<void>;
}

// Every HTTP/2 connection starts with this preface; no HTTP/1 method starts with "PRI".
const H2_PREFACE_START = Buffer.from("PRI");

/**
 * Serves both protocols on one port by sniffing the first bytes of each connection: the
 * HTTP/2 client preface goes to an h2c server, everything else to an HTTP/1.1 server.
 */
export function createDualServer(handler: Handler, opts: { maxHeaderBytes?: number; limits?: ConnectionLimits } = {}): DualServer {
  const limits = opts.limits ?? DEFAULT_CONNECTION_LIMITS;
  const h1 = http.createServer(
    {
      maxHeaderSize: opts.maxHeaderBytes ?? 16 * 1024,
      keepAliveTimeout: Math.min(65_000, limits.idleTimeoutMs),
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // How often the timeouts above are checked (Node's default, 30 s, would let them overrun).
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, limits.headersTimeoutMs / 4)),
    },
    handler,
  );
  // http.Server arms headersTimeout / requestTimeout (its connection-checking timer) on 'listening',
  // and this one never listens: its sockets are handed over by the sniffer below. Without this, a
  // slowloris peer on HTTP/1.1 was never cut (e2e/adversarial.test.ts).
  h1.emit("listening");
  const h2 = http2.createServer({ settings: { maxConcurrentStreams: limits.maxConcurrentStreams } }, guardStreamResets(handler, limits));
  const sockets = new Set<Socket>();
  const h2Sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    closeWhenIdle(session, limits.idleTimeoutMs);
    h2Sessions.add(session);
    session.once("close", () => h2Sessions.delete(session));
  });

  // noDelay: http.Server sets TCP_NODELAY only on sockets it accepts itself, not on injected ones.
  const tcp = net.createServer({ noDelay: true, keepAlive: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    // A peer that sends nothing (or too little to tell the protocols apart) must not hold a socket.
    const sniffTimer = setTimeout(() => socket.destroy(), limits.sniffTimeoutMs);
    socket.once("close", () => clearTimeout(sniffTimer));
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      if (head.length < H2_PREFACE_START.length && head.equals(H2_PREFACE_START.subarray(0, head.length))) return;
      clearTimeout(sniffTimer);
      socket.off("data", onData);
      socket.pause();
      socket.unshift(head);
      const isH2 = head.subarray(0, H2_PREFACE_START.length).equals(H2_PREFACE_START);
      (isH2 ? h2 : h1).emit("connection", socket);
      process.nextTick(() => socket.resume());
    };
    socket.on("data", onData);
  });

  tcp.maxConnections = limits.maxConnections;

  return {
    listen: (port, host) => listenOn(tcp, port, host),
    // Requests still open get a short grace; then the sockets are cut.
    close: () => closeGracefully({ server: tcp, sockets, sessions: h2Sessions, cutIdle: () => h1.closeIdleConnections() }),
  };
}
