import http2 from "node:http2";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { closeGracefully, listenOn } from "@shoal/common";
import type { DualServer } from "./dual-server.ts";

import type { Handler, Res } from "./http-types.ts";
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from "./connection-limits.ts";
import { closeWhenIdle } from "./idle-sessions.ts";
import { guardStreamResets } from "./stream-reset-guard.ts";

/** PEM certificate chain and private key. */
export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/**
 * One TLS port for every client: ALPN picks h2 (gRPC, Connect over HTTP/2) or http/1.1
 * (browsers, Connect JSON, gRPC-Web), so no preface sniffing is needed. A plain-text client
 * fails the TLS handshake and gets nothing.
 */
export function createTlsServer(handler: Handler, tls: TlsMaterial, limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS): DualServer {
  // HTTP/1.1 answers in progress per socket: close() cuts idle keep-alive connections at once, and
  // the idle timeout never cuts one whose answer the gateway is still computing.
  const busy = new Map<TLSSocket, Set<Res>>();
  const guarded = guardStreamResets(handler, limits);
  const track: Handler = (req, res) => {
    if (req.httpVersionMajor === 1) {
      const socket = req.socket as TLSSocket;
      // Node's HTTP/1.1 code clears the socket's timeout when a keep-alive connection's next request
      // comes: armed again for each request.
      socket.setTimeout(limits.idleTimeoutMs);
      const answers = busy.get(socket) ?? new Set();
      busy.set(socket, answers.add(res));
      res.once("close", () => {
        answers.delete(res);
        if (answers.size === 0) busy.delete(socket);
      });
    }
    guarded(req, res);
  };
  const server = http2.createSecureServer(
    {
      cert: tls.cert,
      key: tls.key,
      allowHTTP1: true,
      ALPNProtocols: ["h2", "http/1.1"],
      minVersion: "TLSv1.2",
      noDelay: true,
      keepAlive: true,
      settings: { maxConcurrentStreams: limits.maxConcurrentStreams },
      // The TLS handshake and first bytes must come within the sniff timeout (a silent peer is cut).
      handshakeTimeout: limits.sniffTimeoutMs,
    },
    // With allowHTTP1 the same handler also receives http.IncomingMessage / ServerResponse.
    track as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  // HTTP/1.1 sockets idle for SHOAL_IDLE_TIMEOUT_MS: cut, unless the gateway is still writing an
  // answer (that call is bounded by its deadline). With this listener Node leaves the choice here.
  // Between keep-alive requests Node's HTTP/1.1 code arms its own timeout, keepAliveTimeout (+1 s):
  // the server's (5 s by default; the plain port uses the same value as here).
  Object.assign(server, { keepAliveTimeout: Math.min(65_000, limits.idleTimeoutMs) });
  server.on("timeout", (socket: TLSSocket) => {
    const answers = busy.get(socket);
    if (answers === undefined || [...answers].every((res) => res.writableEnded)) socket.destroy();
  });
  server.maxConnections = limits.maxConnections;
  // HTTP/1.1 over TLS: headers and whole-request deadlines (slowloris), as on the plain-text port.
  // Node's HTTP/1.1 fallback of an HTTP/2 server arms neither headersTimeout nor requestTimeout
  // (a peer dripping header bytes was never cut: e2e/adversarial.test.ts), so both are timers here.
  // The headers deadline runs from the connection, then from the first byte of each next request.
  const headersDeadline = new Map<Socket, NodeJS.Timeout>();
  const clearHeadersDeadline = (socket: Socket): void => {
    clearTimeout(headersDeadline.get(socket));
    headersDeadline.delete(socket);
  };
  const armHeadersDeadline = (socket: Socket): void => {
    clearHeadersDeadline(socket);
    if (!socket.destroyed)
      headersDeadline.set(
        socket,
        setTimeout(() => socket.destroy(), limits.headersTimeoutMs),
      );
  };
  server.on("request", (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    if (req.httpVersionMajor !== 1) return;
    const socket = req.socket;
    clearHeadersDeadline(socket);
    const timer = setTimeout(() => socket.destroy(), limits.requestTimeoutMs);
    req.once("end", () => clearTimeout(timer));
    res.once("finish", () => {
      clearTimeout(timer);
      // Keep-alive: the next request's headers get the same deadline from their first byte
      // (prepended: armed before the HTTP parser reads that byte and may emit 'request').
      socket.prependOnceListener("data", () => armHeadersDeadline(socket));
    });
    socket.once("close", () => clearTimeout(timer));
  });
  const sockets = new Set<TLSSocket>();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("secureConnection", (socket: TLSSocket) => {
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      clearHeadersDeadline(socket);
    });
    if (socket.alpnProtocol !== "h2") {
      armHeadersDeadline(socket);
      socket.setTimeout(limits.idleTimeoutMs);
    }
  });
  server.on("session", (session) => {
    closeWhenIdle(session, limits.idleTimeoutMs);
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  // Failed handshakes (plain text, unknown CA on the client side) are the client's problem.
  server.on("tlsClientError", (_err, socket) => socket.destroy());

  return {
    listen: (port, host) => listenOn(server, port, host),
    // HTTP/1.1 has no GOAWAY: idle connections are cut now, busy ones after a short grace.
    close: () =>
      closeGracefully({
        server,
        sockets,
        sessions,
        cutIdle() {
          for (const socket of sockets) if (socket.alpnProtocol !== "h2" && !busy.has(socket)) socket.destroy();
        },
      }),
  };
}
