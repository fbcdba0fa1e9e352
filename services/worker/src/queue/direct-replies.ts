import http2 from "node:http2";
import { DIRECT_REPLY_GATEWAY_HEADER, DIRECT_REPLY_PATH, MAX_RECORD_BYTES, SIGNATURE_HEADER, type Logger, type RecordSigner } from "@shoal/common";
import type { DirectTarget } from "./reply-registry.ts";
import { openResultStream, type ResultStream } from "./result-stream.ts";

/** Why a result went through the reply topic after all. */
export type DirectFallback = "unreachable" | "timeout" | "misdirected" | "refused" | "paused";

/**
 * Hands results straight to the gateway that holds the call (issue #17): one h2c session per
 * gateway address, and on it one result stream per gateway instance (result-stream.ts), every
 * result a frame answered by an ack; a gateway without result streams (404) gets one POST per
 * result. Anything short of the gateway taking it — refused, reset, timed out, another gateway at
 * the address — answers false and the caller sends the result through the reply topic, so a result
 * is never lost to this path. After a failure of the address itself, results skip it for `pauseMs`
 * (a gateway gone or stopped costs one timeout, not one each).
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
  /** Results as frames of one stream per gateway (default true); false: one POST each. */
  readonly stream?: boolean;
}

interface Peer {
  session: http2.ClientHttp2Session | undefined;
  pausedUntilMs: number;
  /** The result stream to each gateway instance at the address (one, but for a restart). */
  readonly streams: Map<string, ResultStream>;
  /** Instances that answered a result stream with 404 (an older gateway): POST to them. */
  readonly postOnly: Set<string>;
}

/** A larger result goes as a POST (the gateway refuses it either way: it is over the record limit). */
const MAX_FRAME_RESULT_BYTES = MAX_RECORD_BYTES;

/** Past this many addresses the least recently added is forgotten (gateways come and go). */
const MAX_PEERS = 256;

export function createDirectReplies(logger: Logger, opts: DirectRepliesOptions = {}): DirectReplies {
  const log = logger.child({ component: "direct-replies" });
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const pauseMs = opts.pauseMs ?? 5_000;
  const useStreams = opts.stream ?? true;
  const peers = new Map<string, Peer>();
  let closed = false;
  let lastWarnMs = 0;

  function pause(address: string, peer: Peer, why: DirectFallback, err?: unknown): void {
    peer.pausedUntilMs = Date.now() + pauseMs;
    // Destroying the session ends its result streams: their unacked results fall back at once.
    peer.streams.clear();
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
          for (const st of old.streams.values()) st.close();
          old.session?.close();
          peers.delete(oldest);
        }
        peer = { session: undefined, pausedUntilMs: 0, streams: new Map(), postOnly: new Set() };
        peers.set(target.address, peer);
      }
      if (Date.now() < peer.pausedUntilMs) return Promise.resolve(fallback("paused"));
      const sig = opts.signer?.enabled ? opts.signer.sign("result", value) : undefined;
      if (useStreams && !peer.postOnly.has(target.instanceId) && value.byteLength <= MAX_FRAME_RESULT_BYTES)
        return viaStream(target, peer, value, sig, headers);
      return viaPost(target, peer, value, sig, headers);
    },
    close() {
      closed = true;
      for (const peer of peers.values()) {
        for (const s of peer.streams.values()) s.close();
        peer.session?.close();
      }
      peers.clear();
    },
  };

  async function viaStream(
    target: DirectTarget,
    peer: Peer,
    value: Buffer,
    sig: string | undefined,
    headers: Record<string, string> | undefined,
  ): Promise<boolean> {
    let stream = peer.streams.get(target.instanceId);
    if (stream === undefined || stream.ended) {
      try {
        stream = openResultStream(sessionOf(target.address, peer), target.instanceId, timeoutMs);
      } catch (err) {
        pause(target.address, peer, "unreachable", err);
        return fallback("unreachable");
      }
      peer.streams.set(target.instanceId, stream);
    }
    const outcome = await stream.send(value, sig, headers);
    if (outcome === "taken") return true;
    if (outcome === "unsupported") {
      peer.postOnly.add(target.instanceId);
      return viaPost(target, peer, value, sig, headers);
    }
    if (outcome !== "refused" && Date.now() >= peer.pausedUntilMs) pause(target.address, peer, outcome);
    return fallback(outcome);
  }

  function viaPost(target: DirectTarget, p: Peer, value: Buffer, sig: string | undefined, headers: Record<string, string> | undefined): Promise<boolean> {
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
  }
}
