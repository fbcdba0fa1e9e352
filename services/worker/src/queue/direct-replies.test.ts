import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, describe, test } from "node:test";
import { createRecordSigner, DIRECT_REPLY_GATEWAY_HEADER, DIRECT_REPLY_PATH, SIGNATURE_HEADER } from "@shoal/common";
import { pino } from "pino";
import { createDirectReplies, type DirectFallback } from "./direct-replies.ts";

const log = pino({ level: "silent" });

interface Seen {
  readonly path: string;
  readonly gateway: string;
  readonly sig: string | undefined;
  readonly trace: string | undefined;
  readonly body: Buffer;
}

/** A stand-in gateway listener answering each POST with `status` (0: never answers). */
async function gateway(status: number, port = 0): Promise<{ address: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  server.on("stream", (stream, h) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      const header = (name: string) => (typeof h[name] === "string" ? (h[name] as string) : undefined);
      seen.push({
        path: String(h[":path"]),
        gateway: header(DIRECT_REPLY_GATEWAY_HEADER) ?? "",
        sig: header(SIGNATURE_HEADER),
        trace: header("traceparent"),
        body: Buffer.concat(chunks),
      });
      if (status > 0) stream.respond({ ":status": status }, { endStream: true });
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<string> {
  const g = await gateway(200);
  await g.close();
  return g.address;
}

describe("direct replies as one POST each (SHOAL_DIRECT_REPLY_STREAM=0, and gateways without result streams)", () => {
  const closers: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const c of closers) await c();
  });

  test("a 200 takes the result: body, gateway id, signature and trace headers arrive as sent, on one session", async () => {
    const g = await gateway(200);
    closers.push(g.close);
    const signer = createRecordSigner([Buffer.alloc(32, 3)]);
    const direct = createDirectReplies(log, { stream: false, signer });
    closers.push(() => direct.close());
    const body = Buffer.from("result bytes");
    const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert.equal(await direct.send({ address: g.address, instanceId: "g1" }, body, { traceparent: trace }), true);
    assert.equal(await direct.send({ address: g.address, instanceId: "g1" }, body, undefined), true);
    assert.equal(g.seen.length, 2);
    const first = g.seen[0]!;
    assert.equal(first.path, DIRECT_REPLY_PATH);
    assert.equal(first.gateway, "g1");
    assert.deepEqual(first.body, body);
    assert.equal(first.trace, trace);
    assert.ok(signer.verify("result", body, first.sig), "signed as the reply topic's records are");
  });

  test("nobody listening: false at once, and the address is skipped (paused) for a while", async () => {
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { stream: false, pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: await closedPort(), instanceId: "g2" };
    assert.equal(await direct.send(target, Buffer.from("x"), undefined), false);
    assert.equal(await direct.send(target, Buffer.from("y"), undefined), false);
    assert.deepEqual(falls, ["unreachable", "paused"]);
  });

  test("another gateway at the address (421) pauses it; a refused result (403) falls back alone", async () => {
    const misdirected = await gateway(421);
    const refusing = await gateway(403);
    closers.push(misdirected.close, refusing.close);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { stream: false, pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    assert.equal(await direct.send({ address: misdirected.address, instanceId: "g3" }, Buffer.from("a"), undefined), false);
    assert.equal(await direct.send({ address: misdirected.address, instanceId: "g3" }, Buffer.from("b"), undefined), false);
    assert.equal(misdirected.seen.length, 1, "paused after the 421");
    assert.equal(await direct.send({ address: refusing.address, instanceId: "g4" }, Buffer.from("c"), undefined), false);
    assert.equal(await direct.send({ address: refusing.address, instanceId: "g4" }, Buffer.from("d"), undefined), false);
    assert.equal(refusing.seen.length, 2, "a 403 is about the result, not the address: the next one is still tried");
    assert.deepEqual(falls, ["misdirected", "paused", "refused", "refused"]);
  });

  test("a gateway that never answers: false after the timeout, then paused", async () => {
    const silent = await gateway(0);
    closers.push(silent.close);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { stream: false, timeoutMs: 200, pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const t0 = performance.now();
    assert.equal(await direct.send({ address: silent.address, instanceId: "g5" }, Buffer.from("z"), undefined), false);
    const waitedMs = performance.now() - t0;
    assert.ok(waitedMs >= 190 && waitedMs < 2_000, `gave up after the 200 ms timeout (${waitedMs.toFixed(0)} ms)`);
    assert.equal(await direct.send({ address: silent.address, instanceId: "g5" }, Buffer.from("z"), undefined), false);
    assert.deepEqual(falls, ["timeout", "paused"]);
  });

  test("a paused address is tried again once the pause is over", async () => {
    const target = { address: await closedPort(), instanceId: "g6" };
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { stream: false, pauseMs: 300, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    assert.equal(await direct.send(target, Buffer.from("a"), undefined), false);
    // The gateway (re)starts on the same address; within the pause it is not tried.
    const g = await gateway(200, Number(target.address.split(":")[1]));
    closers.push(g.close);
    assert.equal(await direct.send(target, Buffer.from("b"), undefined), false);
    await new Promise((r) => setTimeout(r, 350));
    assert.equal(await direct.send(target, Buffer.from("c"), undefined), true);
    assert.deepEqual(falls, ["unreachable", "paused"]);
    assert.deepEqual(
      g.seen.map((x) => x.body.toString()),
      ["c"],
    );
  });
});
