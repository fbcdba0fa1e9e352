/**
 * Hostile peers for the adversarial suite (issue #19): raw sockets and HTTP/2 sessions that do
 * what a polite client never does. Each returns what the server did to it, measured.
 */
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";

/** How the server ended an attacking connection. */
export interface Cut {
  /** ms from the attack's start until the server closed the connection (Infinity: still open at the horizon). */
  readonly closedAfterMs: number;
  /** First bytes the server wrote back, as text (an HTTP/1.1 status line, or nothing). */
  readonly reply: string;
}

function endpoint(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/** A raw connection to `url`: TCP for http:, TLS with ALPN http/1.1 for https: (any certificate accepted). */
function rawConnect(url: string): net.Socket {
  if (new URL(url).protocol !== "https:") return net.connect(endpoint(url));
  return tls.connect({ ...endpoint(url), servername: "localhost", rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] });
}

/**
 * Opens a connection (TLS for an https: url), then writes `chunks` one every `everyMs` (a slowloris
 * when each is a byte of a header), and waits for the server to close it, at most `horizonMs`.
 */
export function slowWriter(url: string, chunks: readonly string[], everyMs: number, horizonMs: number): Promise<Cut> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = rawConnect(url);
    let reply = "";
    let i = 0;
    const drip = setInterval(() => {
      if (i < chunks.length && !socket.destroyed) socket.write(chunks[i++]!);
    }, everyMs);
    const horizon = setTimeout(() => finish(Number.POSITIVE_INFINITY), horizonMs);
    function finish(closedAfterMs: number): void {
      clearInterval(drip);
      clearTimeout(horizon);
      socket.destroy();
      resolve({ closedAfterMs, reply: reply.split("\r\n")[0] ?? "" });
    }
    socket.on("data", (b: Buffer) => (reply += b.toString("latin1")));
    socket.on("error", () => undefined);
    socket.on("close", () => finish(performance.now() - started));
  });
}

/** An HTTP/1.1 request whose headers never end: one header byte every `everyMs`. */
export const slowHeaders = (url: string, everyMs: number, horizonMs: number): Promise<Cut> =>
  slowWriter(
    url,
    ["POST /shoal.v1.InferenceService/Embed HTTP/1.1\r\nHost: x\r\n", ..."X-Slow: abcdefghijklmnopqrstuvwxyz0123456789".split("")],
    everyMs,
    horizonMs,
  );

/** An HTTP/1.1 request with complete headers and a body that trickles in a byte at a time. */
export const slowBody = (url: string, everyMs: number, horizonMs: number): Promise<Cut> =>
  slowWriter(
    url,
    [
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
      ...'{"model":"x","input":"'.split(""),
      ..."a".repeat(900),
    ],
    everyMs,
    horizonMs,
  );

/** A connection that says nothing at all. */
export const silent = (url: string, horizonMs: number): Promise<Cut> => slowWriter(url, [], 1_000, horizonMs);

/** An HPACK string literal (no Huffman), for the hand-made header blocks below. */
function hpackString(v: string): Buffer {
  const bytes = Buffer.from(v, "latin1");
  if (bytes.length >= 127) throw new RangeError("short strings only");
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

/** One HTTP/2 frame: 24-bit length, type, flags, stream id. */
function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

/**
 * One HTTP/2 connection that ignores the server's SETTINGS_MAX_CONCURRENT_STREAMS (a polite client
 * such as Node's queues past it; an attacker does not): it opens `streams` Embed streams at once
 * with raw frames and never sends their bodies, then counts how the server answered.
 * @returns streams reset by the server with REFUSED_STREAM, with another code, and whether it sent GOAWAY
 */
export function streamFlood(url: string, streams: number, settleMs: number): Promise<{ refused: number; otherResets: number; goaway: boolean }> {
  // :method POST (static 3), :scheme http (static 6), :path and content-type as literals with indexed names.
  const block = Buffer.concat([
    Buffer.from([0x83, 0x86]),
    Buffer.from([0x04]),
    hpackString("/shoal.v1.InferenceService/Embed"),
    Buffer.from([0x01]),
    hpackString("127.0.0.1"),
    Buffer.from([0x0f, 0x10]),
    hpackString("application/grpc"),
  ]);
  return new Promise((resolve) => {
    const socket = net.connect(endpoint(url), () => {
      const frames = [Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"), frame(0x4, 0, 0, Buffer.alloc(0))];
      // HEADERS with END_HEADERS (0x4), no END_STREAM: each stream waits for a body that never comes.
      for (let i = 0; i < streams; i++) frames.push(frame(0x1, 0x4, 1 + 2 * i, block));
      socket.write(Buffer.concat(frames));
    });
    let buf = Buffer.alloc(0);
    let refused = 0;
    let otherResets = 0;
    let goaway = false;
    socket.on("data", (b: Buffer) => {
      buf = Buffer.concat([buf, b]);
      while (buf.length >= 9) {
        const len = buf.readUIntBE(0, 3);
        if (buf.length < 9 + len) break;
        const type = buf.readUInt8(3);
        if (type === 0x3) {
          if (buf.readUInt32BE(9) === 0x7) refused++;
          else otherResets++;
        }
        if (type === 0x7) goaway = true;
        buf = buf.subarray(9 + len);
      }
    });
    socket.on("error", () => undefined);
    setTimeout(() => {
      socket.destroy();
      resolve({ refused, otherResets, goaway });
    }, settleMs);
  });
}

/**
 * An HTTP/2 connection that completes the handshake and then sends nothing: waits for the server to
 * close it (idle timeout), at most `horizonMs`.
 */
export function idleSession(url: string, horizonMs: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve) => {
    const session = http2.connect(url);
    session.on("error", () => undefined);
    const horizon = setTimeout(() => {
      session.destroy();
      resolve(Number.POSITIVE_INFINITY);
    }, horizonMs);
    session.on("close", () => {
      clearTimeout(horizon);
      resolve(performance.now() - started);
    });
  });
}

/**
 * Sends an HTTP/1.1 request and reads nothing for `holdMs` (the socket stays paused), then reads
 * for up to 2 s more.
 * @returns bytes of the answer that were waiting (the server produced it and kept it for the stuck reader)
 */
export function neverReads(url: string, request: string, holdMs: number): Promise<number> {
  return new Promise((resolve) => {
    const socket = net.connect(endpoint(url), () => {
      socket.write(request);
      socket.pause();
    });
    socket.on("error", () => undefined);
    let bytes = 0;
    setTimeout(() => {
      socket.on("data", (b: Buffer) => (bytes += b.length));
      socket.resume();
      setTimeout(() => {
        socket.destroy();
        resolve(bytes);
      }, 2_000);
    }, holdMs);
  });
}

/** An answer read off a raw connection. */
export interface RawAnswer {
  readonly status: number;
  readonly body: string;
}

/**
 * A GET whose request target is sent byte for byte, over HTTP/1.1 (a raw socket) or HTTP/2 (`:path`
 * as given): no client URL parser normalises `..` or `%2e%2e` before the server sees it.
 */
export function rawGet(url: string, target: string, version: "1.1" | "2"): Promise<RawAnswer> {
  if (version === "2") {
    return new Promise((resolve, reject) => {
      const session = http2.connect(url);
      session.on("error", reject);
      const req = session.request({ ":method": "GET", ":path": target });
      const chunks: Buffer[] = [];
      let status = 0;
      req.on("response", (h) => (status = Number(h[":status"])));
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("error", reject);
      req.on("end", () => {
        session.close();
        resolve({ status, body: Buffer.concat(chunks).toString("utf8") });
      });
    });
  }
  return new Promise((resolve, reject) => {
    const socket = rawConnect(url);
    socket.once(socket instanceof tls.TLSSocket ? "secureConnect" : "connect", () =>
      socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
    );
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}
