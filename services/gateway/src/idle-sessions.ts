import http2 from "node:http2";

/**
 * A stream waits on its client while the request has not all arrived, or while the answer is
 * written but not yet taken by the client (flow control). Otherwise the gateway is answering it.
 */
function waitsOnClient(stream: http2.ServerHttp2Stream): boolean {
  return !stream.readableEnded || (stream.writableEnded && !stream.writableFinished);
}

/**
 * The idle timeout of one HTTP/2 session (SHOAL_IDLE_TIMEOUT_MS). After `idleMs` with no traffic,
 * its streams that wait on the client are cancelled, and the session is closed (GOAWAY) unless a
 * call is still being answered by the gateway: such a call is bounded by its own deadline, not by
 * the peer's silence, and the timer is armed again. Node's `server.setTimeout` destroyed the whole
 * session, cancelling a call that waited longer than the idle timeout for its answer.
 */
export function closeWhenIdle(session: http2.ServerHttp2Session, idleMs: number): void {
  const open = new Set<http2.ServerHttp2Stream>();
  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    open.add(stream);
    stream.once("close", () => open.delete(stream));
  });
  const onIdle = (): void => {
    if (session.destroyed || session.closed) return;
    let answering = 0;
    for (const stream of open) {
      if (waitsOnClient(stream)) stream.close(http2.constants.NGHTTP2_CANCEL);
      else answering++;
    }
    if (answering === 0) session.close();
    else session.setTimeout(idleMs, onIdle);
  };
  session.setTimeout(idleMs, onIdle);
}
