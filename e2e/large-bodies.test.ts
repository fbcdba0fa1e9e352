/**
 * Large Connect JSON bodies stay bad input when they are bad (issue #52): since bodies of 256 KiB
 * and more are decoded on the gateway's JSON thread, each kind of bad large body still gets its
 * clear error, and the HTTP/2 connection it came on keeps serving its other streams.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { startCluster, type TestCluster } from "./harness/cluster.ts";

/** What one stream got: its HTTP status and body, or the code the server reset it with. */
interface StreamAnswer {
  readonly status: number;
  readonly body: string;
  readonly rstCode: number;
}

/**
 * Sends a Connect JSON Embed on `session`: `body` (all of it, or its first `sendBytes`, then the
 * stream ends), declaring `contentLength` (none: undefined).
 */
function embed(session: http2.ClientHttp2Session, body: Buffer, opts: { contentLength?: number; sendBytes?: number } = {}): Promise<StreamAnswer> {
  return new Promise((resolve) => {
    const headers: http2.OutgoingHttpHeaders = { ":method": "POST", ":path": "/shoal.v1.InferenceService/Embed", "content-type": "application/json" };
    if (opts.contentLength !== undefined) headers["content-length"] = String(opts.contentLength);
    const stream = session.request(headers);
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => undefined);
    stream.on("close", () => resolve({ status, body: Buffer.concat(chunks).toString("utf8"), rstCode: stream.rstCode ?? 0 }));
    stream.end(opts.sendBytes === undefined ? body : body.subarray(0, opts.sendBytes));
  });
}

/** A Connect JSON Embed body of `texts` texts of `chars` characters each. */
function embedBody(model: string, texts: number, chars: number): Buffer {
  return Buffer.from(JSON.stringify({ model, inputs: Array.from({ length: texts }, (_, i) => `t${i}${"x".repeat(chars - 1 - String(i).length)}`) }));
}

describe("large bad bodies: a clear error each, the connection's other streams unharmed", () => {
  let cluster: TestCluster;
  let model: string;
  let session: http2.ClientHttp2Session;
  const small = (): Buffer => Buffer.from(JSON.stringify({ model, inputs: ["a small call beside a large bad one"] }));

  before(async () => {
    cluster = await startCluster({ gateways: 1, workers: 1 });
    model = cluster.modelIds[0]!;
    session = http2.connect(cluster.urls[0]!);
    session.on("error", () => undefined);
  });
  after(async () => {
    session?.close();
    await cluster?.stop();
  });

  /** Runs `bad` beside three small calls on the same connection, and returns its answer once all small ones succeeded. */
  async function besideSmallCalls(bad: () => Promise<StreamAnswer>): Promise<StreamAnswer> {
    const [answer, ...smalls] = await Promise.all([bad(), ...Array.from({ length: 3 }, () => embed(session, small()))]);
    for (const s of smalls) assert.equal(s.status, 200, `a small call on the same connection: ${s.status} ${s.body.slice(0, 200)}`);
    assert.ok(!session.destroyed && !session.closed, "the connection is still open");
    return answer!;
  }

  test("a valid 7.8 MiB body (256 texts of 32,000 characters) is answered", async () => {
    const body = embedBody(model, 256, 32_000);
    const ok = await besideSmallCalls(() => embed(session, body, { contentLength: body.length }));
    assert.equal(ok.status, 200, ok.body.slice(0, 300));
    assert.equal((JSON.parse(ok.body) as { embeddings: unknown[] }).embeddings.length, 256);
  });

  test("malformed JSON at the end of a 7.8 MiB body: InvalidArgument (400), the body never echoed", async () => {
    const good = embedBody(model, 256, 32_000);
    // `]}` becomes `],`: valid for 8 million bytes, broken at the very end.
    const body = Buffer.concat([good.subarray(0, good.length - 1), Buffer.from(",")]);
    const bad = await besideSmallCalls(() => embed(session, body, { contentLength: body.length }));
    assert.equal(bad.status, 400, bad.body.slice(0, 300));
    const err = JSON.parse(bad.body) as { code: string; message: string };
    assert.equal(err.code, "invalid_argument");
    assert.match(err.message, /^cannot decode message shoal\.v1\.EmbedRequest from JSON/);
    assert.ok(err.message.length < 300 && !err.message.includes("xxxx"), err.message);
  });

  test("a field of the wrong type deep in a large body: InvalidArgument naming the field", async () => {
    const body = Buffer.from(JSON.stringify({ model, inputs: [...Array.from({ length: 100 }, () => "y".repeat(4_000)), 42] }));
    const bad = await besideSmallCalls(() => embed(session, body, { contentLength: body.length }));
    assert.equal(bad.status, 400, bad.body.slice(0, 300));
    assert.match((JSON.parse(bad.body) as { message: string }).message, /shoal\.v1\.EmbedRequest\.inputs/);
  });

  test("a body over the limit (9 MiB declared): ResourceExhausted (429) before it is read", async () => {
    const body = embedBody(model, 300, 32_000);
    assert.ok(body.length > 8 * 2 ** 20);
    const over = await besideSmallCalls(() => embed(session, body, { contentLength: body.length }));
    assert.equal(over.status, 429, over.body.slice(0, 300));
    assert.equal((JSON.parse(over.body) as { code: string }).code, "resource_exhausted");
  });

  test("a body that stops half way (7.8 MiB declared, 3.9 MiB sent, then the stream ends): the stream is refused, never half-decoded", async () => {
    const body = embedBody(model, 256, 32_000);
    const half = await besideSmallCalls(() => embed(session, body, { contentLength: body.length, sendBytes: body.length >> 1 }));
    // HTTP/2 checks content-length itself: the stream is reset (PROTOCOL_ERROR), or answered with an error.
    assert.ok(
      half.rstCode === http2.constants.NGHTTP2_PROTOCOL_ERROR || (half.status >= 400 && half.status < 500),
      `status ${half.status}, reset ${half.rstCode}: ${half.body.slice(0, 200)}`,
    );
  });

  test("a body that stops half way without a declared length: InvalidArgument (the JSON is cut)", async () => {
    const body = embedBody(model, 256, 32_000);
    const half = await besideSmallCalls(() => embed(session, body, { sendBytes: body.length >> 1 }));
    assert.equal(half.status, 400, half.body.slice(0, 300));
    assert.equal((JSON.parse(half.body) as { code: string }).code, "invalid_argument");
  });
});
