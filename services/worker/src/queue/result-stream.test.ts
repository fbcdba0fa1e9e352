import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createRecordSigner, DIRECT_REPLY_PATH, DIRECT_REPLY_STREAM_PATH, encodeResult } from "@shoal/common";
import { JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { pino } from "pino";
// The gateway's half of the protocol, the real listener: both halves are tested together.
import { createDirectReplyServer, type DirectReplyRefusal } from "../../../gateway/src/direct-replies.ts";
import { PendingJobs } from "../../../gateway/src/pending-jobs.ts";
import { createDirectReplies, type DirectFallback } from "./direct-replies.ts";

const log = pino({ level: "silent" });
const resultBytes = (jobId: string): Buffer => Buffer.from(encodeResult(create(JobResultSchema, { jobId, status: JobStatus.OK, workerId: "w1" })));

/** The gateway's direct-reply listener with `n` calls waiting (jobs j0..j{n-1}), counting its HTTP/2 requests by path. */
async function listener(instanceId: string, n: number, signer?: ReturnType<typeof createRecordSigner>) {
  const pending = new PendingJobs();
  // The calls a test leaves unanswered are cancelled when the listener stops.
  const calls = new AbortController();
  const answers = Array.from({ length: n }, (_, i) => pending.register(`j${i}`, Date.now() + 60_000, calls.signal));
  for (const a of answers) a.catch(() => undefined);
  const received: string[] = [];
  const refused: DirectReplyRefusal[] = [];
  const server = createDirectReplyServer(log, {
    instanceId,
    replyTopic: `shoal.replies.${instanceId}`,
    host: "127.0.0.1",
    port: 0,
    advertise: undefined,
    onResult: (r) => pending.settle(r),
    ...(signer ? { signer } : {}),
    onReceived: (o) => received.push(o),
    onRefused: (r) => refused.push(r),
  });
  const address = await server.start();
  const stop = async (): Promise<void> => {
    calls.abort();
    await server.stop();
  };
  return { address, answers, received, refused, stop };
}

/** A stand-in for a gateway from before result streams: 404 on the stream path, 200 on each POST. */
async function postOnlyGateway(): Promise<{ address: string; paths: string[]; close(): Promise<void> }> {
  const paths: string[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  server.on("stream", (stream, h) => {
    paths.push(String(h[":path"]));
    if (h[":path"] !== DIRECT_REPLY_PATH) return stream.respond({ ":status": 404 }, { endStream: true });
    stream.resume();
    stream.on("end", () => stream.respond({ ":status": 200 }, { endStream: true }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    paths,
    close: () =>
      new Promise((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("direct replies as frames of one result stream per gateway (the default)", () => {
  const closers: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const c of closers.reverse()) await c();
  });

  test("60 signed results at once on one stream: every call gets its own result, acked as delivered; a repeat is acked as taken with no call", async () => {
    const signer = createRecordSigner([Buffer.alloc(32, 5)]);
    const g = await listener("g-stream", 60, signer);
    closers.push(g.stop);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { signer, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: g.address, instanceId: "g-stream" };
    const trace = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };
    const sent = await Promise.all(Array.from({ length: 60 }, (_, i) => direct.send(target, resultBytes(`j${i}`), trace)));
    assert.deepEqual(sent, Array(60).fill(true));
    const results = await Promise.all(g.answers);
    assert.deepEqual(
      results.map((r) => r.jobId),
      Array.from({ length: 60 }, (_, i) => `j${i}`),
    );
    assert.equal(await direct.send(target, resultBytes("j7"), undefined), true, "a duplicate is taken (and dropped by the gateway)");
    assert.deepEqual(g.received, [...Array(60).fill("delivered"), "unknown"]);
    assert.deepEqual(falls, []);
  });

  test("closing (a worker stopping) lets the results in flight have their acks: 20 sent, close at once, 20 taken", async () => {
    const g = await listener("g-close", 20);
    closers.push(g.stop);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { onFallback: (w) => falls.push(w) });
    const target = { address: g.address, instanceId: "g-close" };
    assert.equal(await direct.send(target, resultBytes("j0"), undefined), true, "the stream is open");
    const inFlight = Array.from({ length: 19 }, (_, i) => direct.send(target, resultBytes(`j${i + 1}`), undefined));
    direct.close();
    assert.deepEqual(await Promise.all(inFlight), Array(19).fill(true));
    assert.equal(await direct.send(target, resultBytes("late"), undefined), false, "nothing is sent once closed");
    assert.deepEqual(falls, ["paused"]);
    assert.deepEqual(g.received, Array(20).fill("delivered"));
  });

  test("a wrongly signed result is refused alone: it falls back, and the next one on the same stream is taken", async () => {
    const g = await listener("g-keys", 2, createRecordSigner([Buffer.alloc(32, 6)]));
    closers.push(g.stop);
    const falls: DirectFallback[] = [];
    const good = createDirectReplies(log, { signer: createRecordSigner([Buffer.alloc(32, 6)]), onFallback: (w) => falls.push(w) });
    const forged = createDirectReplies(log, { signer: createRecordSigner([Buffer.alloc(32, 9)]), pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(
      () => good.close(),
      () => forged.close(),
    );
    const target = { address: g.address, instanceId: "g-keys" };
    assert.equal(await forged.send(target, resultBytes("j0"), undefined), false);
    assert.equal(await forged.send(target, resultBytes("j0"), undefined), false, "not paused: a refusal is about the result");
    assert.equal(await good.send(target, resultBytes("j1"), undefined), true);
    assert.deepEqual(falls, ["refused", "refused"]);
    assert.deepEqual(g.refused, ["signature", "signature"]);
    assert.equal((await g.answers[1]!).jobId, "j1");
  });

  test("another gateway instance at the address: misdirected, the address paused, nothing settled", async () => {
    const g = await listener("g-now", 1);
    closers.push(g.stop);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: g.address, instanceId: "g-before-restart" };
    assert.equal(await direct.send(target, resultBytes("j0"), undefined), false);
    assert.equal(await direct.send(target, resultBytes("j0"), undefined), false);
    assert.deepEqual(falls, ["misdirected", "paused"]);
    assert.deepEqual(g.refused, ["misdirected"]);
    assert.deepEqual(g.received, []);
  });

  test("a gateway without result streams (404): the result goes as a POST at once, and so do the next ones", async () => {
    const g = await postOnlyGateway();
    closers.push(g.close);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: g.address, instanceId: "g-old" };
    assert.equal(await direct.send(target, resultBytes("a"), undefined), true);
    assert.equal(await direct.send(target, resultBytes("b"), undefined), true);
    assert.deepEqual(g.paths, [DIRECT_REPLY_STREAM_PATH, DIRECT_REPLY_PATH, DIRECT_REPLY_PATH]);
    assert.deepEqual(falls, []);
  });

  test("a stopping gateway ends the stream: an unacked result falls back, and the stop does not wait for the stream", async () => {
    const g = await listener("g-stop", 1);
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { timeoutMs: 30_000, pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: g.address, instanceId: "g-stop" };
    assert.equal(await direct.send(target, resultBytes("j0"), undefined), true, "the stream is open");
    const t0 = performance.now();
    await g.stop();
    const stopMs = performance.now() - t0;
    assert.ok(stopMs < 5_000, `the listener stopped in ${stopMs.toFixed(0)} ms with a result stream open`);
    assert.equal(await direct.send(target, resultBytes("j1"), undefined), false);
    assert.ok(falls.length === 1 && ["unreachable", "paused"].includes(falls[0]!), `fell back: ${falls.join(", ")}`);
  });

  test("a gateway that never acks: false after the timeout, then the address is paused", async () => {
    const silent = http2.createServer();
    const sessions = new Set<http2.ServerHttp2Session>();
    silent.on("session", (s) => sessions.add(s));
    silent.on("stream", (stream) => {
      stream.respond({ ":status": 200 });
      stream.resume();
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    closers.push(
      () =>
        new Promise<void>((r) => {
          for (const s of sessions) s.destroy();
          silent.close(() => r());
        }),
    );
    const falls: DirectFallback[] = [];
    const direct = createDirectReplies(log, { timeoutMs: 200, pauseMs: 60_000, onFallback: (w) => falls.push(w) });
    closers.push(() => direct.close());
    const target = { address: `127.0.0.1:${(silent.address() as AddressInfo).port}`, instanceId: "g-silent" };
    const t0 = performance.now();
    assert.equal(await direct.send(target, resultBytes("z"), undefined), false);
    const waitedMs = performance.now() - t0;
    assert.ok(waitedMs >= 190 && waitedMs < 2_000, `gave up after the 200 ms timeout (${waitedMs.toFixed(0)} ms)`);
    assert.equal(await direct.send(target, resultBytes("z"), undefined), false);
    assert.deepEqual(falls, ["timeout", "paused"]);
  });
});
