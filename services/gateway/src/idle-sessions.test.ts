import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import type http from "node:http";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import tls from "node:tls";
import { selfSignedCert } from "@shoal/common/self-signed";
import { DEFAULT_CONNECTION_LIMITS } from "./connection-limits.ts";
import { createDualServer, type DualServer } from "./dual-server.ts";
import type { Handler } from "./http-types.ts";
import { createTlsServer } from "./tls-server.ts";

const IDLE_MS = 300;
const limits = { ...DEFAULT_CONNECTION_LIMITS, idleTimeoutMs: IDLE_MS };
/** Answers `/slow` after 4 idle timeouts, everything else at once (after reading the body). */
const handler: Handler = (req, res) => {
  const answer = (): void => {
    (res as http.ServerResponse).writeHead(200, { "content-type": "text/plain" });
    res.end(`answered ${req.url}`);
  };
  req.resume();
  req.on("end", () => (req.url === "/slow" ? setTimeout(answer, 4 * IDLE_MS) : answer()));
};

let hasOpenssl = true;
try {
  execFileSync("openssl", ["version"], { stdio: "ignore" });
} catch {
  hasOpenssl = false;
}

interface Outcome {
  readonly body: string;
  readonly rstCode: number;
  readonly ms: number;
}

/** One HTTP/2 request on `session`; `finish: false` sends the headers and never ends the body. */
function request(session: http2.ClientHttp2Session, path: string, finish = true): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ":path": path });
    let body = "";
    stream.on("data", (c: Buffer) => (body += c.toString()));
    stream.on("error", () => undefined);
    stream.on("close", () => resolve({ body, rstCode: stream.rstCode ?? 0, ms: performance.now() - started }));
    if (finish) stream.end("x");
    else stream.write("x");
  });
}

const closedAfter = (session: http2.ClientHttp2Session, started: number): Promise<number> =>
  new Promise((resolve) => session.once("close", () => resolve(performance.now() - started)));

for (const kind of ["h2c (plain port)", "h2 over TLS"] as const) {
  describe(`HTTP/2 idle timeout, ${kind}`, { skip: kind === "h2 over TLS" && !hasOpenssl && "openssl CLI not found" }, () => {
    async function withServer(body: (session: () => http2.ClientHttp2Session) => Promise<void>): Promise<void> {
      let server: DualServer;
      let url: string;
      let ca: Buffer | undefined;
      if (kind === "h2c (plain port)") {
        server = createDualServer(handler, { limits });
        url = "http";
      } else {
        const pair = selfSignedCert(mkdtempSync(join(tmpdir(), "shoal-idle-")), "gateway", "DNS:localhost,IP:127.0.0.1");
        ca = readFileSync(pair.cert);
        server = createTlsServer(handler, { cert: ca, key: readFileSync(pair.key) }, limits);
        url = "https";
      }
      const { port } = await server.listen(0, "127.0.0.1");
      const sessions: http2.ClientHttp2Session[] = [];
      try {
        await body(() => {
          const s = http2.connect(`${url}://127.0.0.1:${port}`, ca === undefined ? {} : { ca });
          s.on("error", () => undefined);
          sessions.push(s);
          return s;
        });
      } finally {
        for (const s of sessions) s.destroy();
        await server.close();
      }
    }

    test("a call the gateway answers after 4 idle timeouts is answered, not cancelled; the session closes once idle", () =>
      withServer(async (connect) => {
        const session = connect();
        const started = performance.now();
        const closed = closedAfter(session, started);
        const slow = await request(session, "/slow");
        assert.equal(slow.rstCode, http2.constants.NGHTTP2_NO_ERROR);
        assert.equal(slow.body, "answered /slow");
        assert.ok(slow.ms >= 4 * IDLE_MS - 20, `answered after ${slow.ms.toFixed(0)} ms`);
        // Idle from the answer on: closed one idle timeout later (GOAWAY).
        const ms = await closed;
        assert.ok(ms >= slow.ms + IDLE_MS - 50 && ms < slow.ms + 4 * IDLE_MS, `session closed at ${ms.toFixed(0)} ms, answer at ${slow.ms.toFixed(0)} ms`);
      }));

    test("a session that sends nothing after its handshake is closed after the idle timeout", () =>
      withServer(async (connect) => {
        const started = performance.now();
        const ms = await closedAfter(connect(), started);
        assert.ok(ms >= IDLE_MS - 50 && ms < 4 * IDLE_MS, `closed after ${ms.toFixed(0)} ms`);
      }));

    test("a request whose body stops coming is cancelled after the idle timeout; a call being answered on the same session is not", () =>
      withServer(async (connect) => {
        const session = connect();
        const [stalled, slow] = await Promise.all([request(session, "/stalled", false), request(session, "/slow")]);
        assert.equal(stalled.rstCode, http2.constants.NGHTTP2_CANCEL);
        assert.equal(stalled.body, "");
        assert.ok(stalled.ms >= IDLE_MS - 50 && stalled.ms < 3 * IDLE_MS, `cancelled after ${stalled.ms.toFixed(0)} ms`);
        assert.equal(slow.body, "answered /slow");
        assert.equal(slow.rstCode, http2.constants.NGHTTP2_NO_ERROR);
      }));
  });
}

test("HTTPS/1.1: a call answered after 4 idle timeouts is answered; an idle keep-alive socket is then cut", {
  skip: !hasOpenssl && "openssl CLI not found",
}, async () => {
  const pair = selfSignedCert(mkdtempSync(join(tmpdir(), "shoal-idle-")), "gateway", "DNS:localhost,IP:127.0.0.1");
  const ca = readFileSync(pair.cert);
  const server = createTlsServer(handler, { cert: ca, key: readFileSync(pair.key) }, { ...limits, headersTimeoutMs: 10_000 });
  const { port } = await server.listen(0, "127.0.0.1");
  try {
    // A raw client: Node's https.Agent drops a keep-alive socket whose server hints under 1 s itself.
    const socket = tls.connect({ host: "127.0.0.1", port, ca, servername: "localhost", ALPNProtocols: ["http/1.1"] });
    const started = performance.now();
    let answeredMs = 0;
    let received = "";
    const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(performance.now() - started)));
    socket.on("error", () => undefined);
    socket.on("data", (c: Buffer) => {
      received += c.toString();
      if (answeredMs === 0 && received.includes("answered /slow")) answeredMs = performance.now() - started;
    });
    socket.write("POST /slow HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx");
    const ms = await closed;
    assert.match(received, /^HTTP\/1\.1 200/);
    assert.ok(answeredMs >= 4 * IDLE_MS - 20, `answered after ${answeredMs.toFixed(0)} ms`);
    // Between keep-alive requests Node arms keepAliveTimeout (the idle timeout here) plus 1 s.
    assert.ok(
      ms >= answeredMs + IDLE_MS - 50 && ms < answeredMs + IDLE_MS + 1_600,
      `keep-alive socket cut at ${ms.toFixed(0)} ms, answer at ${answeredMs.toFixed(0)} ms`,
    );
  } finally {
    await server.close();
  }
});
