import http2 from "node:http2";
import { DIRECT_REPLY_GATEWAY_HEADER, DIRECT_REPLY_PATH, SIGNATURE_HEADER, type Logger, type RecordSigner } from "@shoal/common";
import type { DirectTarget } from "./reply-registry.ts";

/** Why a result went through the reply topic after all. */
export type DirectFallback = "unreachable" | "timeout" | "misdirected" | "refused" | "paused";

/**
 * Hands results straight to the gateway that holds the call (issue #17): one h2c session per
 * gateway address, many results on it at once. Anything short of the gateway's 200 — refused,
 * reset, timed out, another gateway at the address — answers false and the caller sends the result
 * through the reply topic, so a result is never lost to this path. After a failure of the address
 * itself, results skip it for `pauseMs` (a gateway gone or stopped costs one timeout, not one each).
 */
export interface DirectReplies {
  /** true once the gateway took the result; false: send it through the reply topic. */
  send(target: DirectTarget, value: Buffer, headers: Record<string, string> | undefined): Promise<boolean>;
  close(): void;
}

export interface DirectRepliesOptions {
  readonly signer?: RecordSigner;
  /** How long a result waits for the gateway's answer (default 2 s). */
  readonly timeoutMs?: number;
  /** How long an address that failed is skipped (default 5 s). */
  readonly pauseMs?: number;
  readonly onFallback?: (why: DirectFallback) => void;
}

interface Peer {
  session: http2.ClientHttp2Session | undefined;
  pausedUntilMs: number;
}

/** Past this many addresses the least recently added is forgotten (gateways come and go). */
const MAX_PEERS = 256;

export function createDirectReplies(logger: Logger, opts: DirectRepliesOptions = {}): DirectReplies {
  const log = logger.child({ component: "direct-replies" });
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const pauseMs = opts.pauseMs ?? 5_000;
  const peers = new Map<string, Peer>();
  let closed = false;
  let lastWarnMs = 0;

  function pause(address: string, peer: Peer, why: DirectFallback, err?: unknown): void {
    peer.pausedUntilMs = Date.now() + pauseMs;
    peer.session?.destroy();
    peer.session = undefined;
    if (Date.now() - lastWarnMs >= 10_000) {
      lastWarnMs = Date.now();
      log.warn({ address, why, err, pauseMs }, "direct results to this gateway fall back to its reply topic");
    }
  }

  function sessionOf(address: string, peer: Peer): http2.ClientHttp2Session {
    if (peer.session !== undefined && !peer.session.closed && !peer.session.destroyed) return peer.session;
    const session = http2.connect(`http://${address}`);
    session.on("error", (err) => {
      if (peer.session === session) pause(address, peer, "unreachable", err);
    });
    session.on("close", () => {
      if (peer.session === session) peer.session = undefined;
    });
    // An idle session must not hold the process open.
    session.unref();
    peer.session = session;
    return session;
  }

  function fallback(why: DirectFallback): false {
    opts.onFallback?.(why);
    return false;
  }

  return {
    send(target, value, headers) {
      if (closed) return Promise.resolve(fallback("paused"));
      let peer = peers.get(target.address);
      if (peer === undefined) {
        if (peers.size >= MAX_PEERS) {
          const [oldest, old] = peers.entries().next().value!;
          old.session?.close();
          peers.delete(oldest);
        }
        peer = { session: undefined, pausedUntilMs: 0 };
        peers.set(target.address, peer);
      }
      if (Date.now() < peer.pausedUntilMs) return Promise.resolve(fallback("paused"));
      const p = peer;
      return new Promise<boolean>((resolve) => {
        let status = 0;
        let settled = false;
        const done = (ok: boolean, why: DirectFallback = "refused", err?: unknown): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (!ok && (why === "unreachable" || why === "timeout" || why === "misdirected")) pause(target.address, p, why, err);
          resolve(ok || fallback(why));
        };
        const timer = setTimeout(() => {
          done(false, "timeout");
          req?.close(http2.constants.NGHTTP2_CANCEL);
        }, timeoutMs);
        let req: http2.ClientHttp2Stream | undefined;
        try {
          const sig = opts.signer?.enabled ? opts.signer.sign("result", value) : undefined;
          req = sessionOf(target.address, p).request({
            ":method": "POST",
            ":path": DIRECT_REPLY_PATH,
            "content-type": "application/x-protobuf",
            "content-length": String(value.byteLength),
            [DIRECT_REPLY_GATEWAY_HEADER]: target.instanceId,
            ...headers,
            ...(sig === undefined ? {} : { [SIGNATURE_HEADER]: sig }),
          });
        } catch (err) {
          done(false, "unreachable", err);
          return;
        }
        req.on("response", (h) => {
          status = Number(h[":status"]);
        });
        req.on("error", (err) => done(false, "unreachable", err));
        req.on("close", () => {
          if (status === 200) done(true);
          else if (status === 421) done(false, "misdirected");
          else if (status === 0) done(false, "unreachable");
          else done(false, "refused");
        });
        // The response has no body that matters; reading it lets the stream close.
        req.resume();
        req.end(value);
      });
    },
    close() {
      closed = true;
      for (const peer of peers.values()) peer.session?.close();
      peers.clear();
    },
  };
}
