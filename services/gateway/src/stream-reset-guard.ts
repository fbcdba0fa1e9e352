import { refuseEarly, stopUploadAfterResponse } from "./early-refusal.ts";
import type { Handler } from "./http-types.ts";

/** How many HTTP/2 streams one connection's client may reset (cancel) before its new streams are refused. */
export interface StreamResetLimits {
  /** Resets allowed at once (a full bucket). */
  readonly streamResetBurst: number;
  /** Resets allowed per second after that (the bucket's refill). */
  readonly streamResetsPerSecond: number;
}

/** A client reset within this long of its stream's start counts against the connection's allowance. */
export const RAPID_RESET_MS = 1_000;

export const REFUSED_MESSAGE = "too many calls cancelled soon after they began on this connection; new calls are refused until its allowance refills";

interface Allowance {
  level: number;
  atMs: number;
}

/**
 * Against a "rapid reset" peer (open a stream, cancel it at once, repeat): each stream costs the
 * gateway its full handling, but frees its concurrency slot at once, so `maxConcurrentStreams`
 * does not bound the cost. Each HTTP/2 connection gets an allowance of client resets (streams the
 * client cancelled within RAPID_RESET_MS of their start, before their answer ended); once spent, its
 * new streams are answered ResourceExhausted at once — gRPC trailers-only, Connect 429, before the
 * body is read or any handler runs — until the allowance refills. (A bare RST_STREAM
 * ENHANCE_YOUR_CALM is as cheap, but clients read it apart: grpc-js as ResourceExhausted,
 * Connect-ES as Internal.) Other connections are untouched. HTTP/1.1 is passed through.
 */
export function guardStreamResets(handler: Handler, limits: StreamResetLimits, now: () => number = () => performance.now()): Handler {
  const allowances = new WeakMap<object, Allowance>();
  const allowanceOf = (session: object): Allowance => {
    const t = now();
    let a = allowances.get(session);
    if (a === undefined) {
      a = { level: limits.streamResetBurst, atMs: t };
      allowances.set(session, a);
    }
    a.level = Math.min(limits.streamResetBurst, a.level + ((t - a.atMs) / 1000) * limits.streamResetsPerSecond);
    a.atMs = t;
    return a;
  };
  return (req, res) => {
    const session = "stream" in req ? req.stream.session : undefined;
    if (session === undefined || !("stream" in req)) {
      handler(req, res);
      return;
    }
    if (allowanceOf(session).level < 1) {
      // In front of the HTTP front, which would otherwise stop the unread upload.
      stopUploadAfterResponse(req);
      refuseEarly(req, res, "resource_exhausted", REFUSED_MESSAGE);
      return;
    }
    // 'aborted': the client reset the stream before the answer ended. Only a reset soon after the
    // stream began counts: streams that live longer are bounded by maxConcurrentStreams already,
    // and a caller whose own deadline ends a slow call is not an attacker.
    const startedMs = now();
    req.once("aborted", () => {
      if (now() - startedMs < RAPID_RESET_MS) allowanceOf(session).level -= 1;
    });
    handler(req, res);
  };
}
