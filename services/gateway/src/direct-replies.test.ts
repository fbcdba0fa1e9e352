import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { sizeDelimitedDecodeStream, sizeDelimitedEncode } from "@bufbuild/protobuf/wire";
import {
  createRecordSigner,
  DIRECT_REPLY_GATEWAY_HEADER,
  DIRECT_REPLY_OUTCOME_HEADER,
  DIRECT_REPLY_PATH,
  DIRECT_REPLY_STREAM_PATH,
  encodeResult,
  SIGNATURE_HEADER,
} from "@shoal/common";
import { type DirectResultAck, DirectResultAckSchema, DirectResultFrameSchema, DirectResultOutcome } from "@shoal/gen/shoal/v1/direct_pb.ts";
import { JobResultSchema, JobStatus, type JobResult } from "@shoal/gen/shoal/v1/job_pb.ts";
import { pino } from "pino";
import { createDirectReplyServer, type DirectReplyRefusal } from "./direct-replies.ts";
import { PendingJobs } from "./pending-jobs.ts";

const INSTANCE = "g-direct-test";
/** A small limit, so a body over it is cheap to send (the default is MAX_RECORD_BYTES). */
const MAX_BYTES = 64 * 1024;
const resultBytes = (jobId: string): Buffer => Buffer.from(encodeResult(create(JobResultSchema, { jobId, status: JobStatus.OK, workerId: "w1" })));

interface Answer {
  readonly status: number;
  readonly outcome: string | undefined;
}

/** One POST on a fresh h2c session, as a worker sends it. */
async function post(address: string, body: Buffer, headers: Record<string, string>, path = DIRECT_REPLY_PATH): Promise<Answer> {
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise<Answer>((resolve, reject) => {
      const req = session.request({ ":method": "POST", ":path": path, "content-length": String(body.length), ...headers });
      let answer: Answer = { status: 0, outcome: undefined };
      req.on("response", (h) => {
        const outcome = h[DIRECT_REPLY_OUTCOME_HEADER];
        answer = { status: Number(h[":status"]), outcome: typeof outcome === "string" ? outcome : undefined };
      });
      req.on("error", reject);
      req.on("close", () => resolve(answer));
      req.resume();
      req.end(body);
    });
  } finally {
    session.close();
  }
}

function serverWith(signer?: ReturnType<typeof createRecordSigner>, streams = true) {
  const pending = new PendingJobs();
  const refused: DirectReplyRefusal[] = [];
  const received: string[] = [];
  const server = createDirectReplyServer(pino({ level: "silent" }), {
    instanceId: INSTANCE,
    replyTopic: `shoal.replies.${INSTANCE}`,
    host: "127.0.0.1",
    port: 0,
    advertise: undefined,
    maxBytes: MAX_BYTES,
    streams,
    onResult: (r: JobResult) => pending.settle(r),
    ...(signer ? { signer } : {}),
    onReceived: (o) => received.push(o),
    onRefused: (r) => refused.push(r),
  });
  return { pending, refused, received, server };
}

describe("direct-reply listener (results straight from workers)", () => {
  const plain = serverWith();
  let address = "";
  before(async () => {
    address = await plain.server.start();
  });
  after(() => plain.server.stop());

  test("advertises the address it listens on", () => {
    assert.match(address, /^127\.0\.0\.1:\d+$/);
  });

  test("a result settles its waiting call once; a duplicate is taken but settles nothing", async () => {
    const call = plain.pending.register("job-1", Date.now() + 10_000, new AbortController().signal);
    const first = await post(address, resultBytes("job-1"), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE });
    assert.deepEqual(first, { status: 200, outcome: "delivered" });
    assert.equal((await call).jobId, "job-1");
    const again = await post(address, resultBytes("job-1"), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE });
    assert.deepEqual(again, { status: 200, outcome: "unknown" });
    assert.deepEqual(plain.received.slice(-2), ["delivered", "unknown"]);
  });

  test("a result meant for another gateway at this address is refused with 421 and settles nothing", async () => {
    const call = plain.pending.register("job-2", Date.now() + 10_000, new AbortController().signal);
    const answer = await post(address, resultBytes("job-2"), { [DIRECT_REPLY_GATEWAY_HEADER]: "another-gateway" });
    assert.equal(answer.status, 421);
    assert.equal(plain.pending.size, 1, "the call still waits (the worker sends the result through the reply topic)");
    assert.equal(plain.refused.at(-1), "misdirected");
    assert.equal(plain.pending.settle(create(JobResultSchema, { jobId: "job-2" })), "delivered");
    await call;
  });

  test("undecodable bytes: 400; a body over the limit: 413; another path: 404", async () => {
    assert.equal((await post(address, Buffer.from([0xff, 0xff, 0xff, 0xff]), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE })).status, 400);
    assert.equal(plain.refused.at(-1), "malformed");
    const big = await post(address, Buffer.alloc(MAX_BYTES + 1), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE });
    assert.equal(big.status, 413);
    assert.equal(plain.refused.at(-1), "too_large");
    assert.equal((await post(address, resultBytes("x"), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE }, "/elsewhere")).status, 404);
  });
});

describe("direct-reply listener with cluster keys", () => {
  const key = Buffer.alloc(32, 7);
  const signer = createRecordSigner([key]);
  const signed = serverWith(signer);
  let address = "";
  before(async () => {
    address = await signed.server.start();
  });
  after(() => signed.server.stop());

  test("an unsigned or wrongly signed result is refused with 403 and settles nothing; a signed one settles its call", async () => {
    const call = signed.pending.register("job-s", Date.now() + 10_000, new AbortController().signal);
    const body = resultBytes("job-s");
    assert.equal((await post(address, body, { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE })).status, 403);
    const forger = createRecordSigner([Buffer.alloc(32, 9)]);
    assert.equal((await post(address, body, { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE, [SIGNATURE_HEADER]: forger.sign("result", body)! })).status, 403);
    assert.deepEqual(signed.refused, ["signature", "signature"]);
    assert.equal(signed.pending.size, 1);
    const ok = await post(address, body, { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE, [SIGNATURE_HEADER]: signer.sign("result", body)! });
    assert.deepEqual(ok, { status: 200, outcome: "delivered" });
    assert.equal((await call).jobId, "job-s");
  });
});

/**
 * Writes raw frames (each a size-delimited DirectResultFrame, or raw bytes) on one result stream;
 * returns the response status, the acks read until the stream closed, and its reset code.
 */
async function streamFrames(
  address: string,
  instance: string,
  frames: readonly Uint8Array[],
): Promise<{ status: number; acks: DirectResultAck[]; rstCode: number }> {
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({ ":method": "POST", ":path": DIRECT_REPLY_STREAM_PATH, [DIRECT_REPLY_GATEWAY_HEADER]: instance });
      let status = 0;
      const acks: DirectResultAck[] = [];
      req.on("response", (h) => {
        status = Number(h[":status"]);
      });
      req.on("error", () => undefined);
      void (async () => {
        try {
          for await (const ack of sizeDelimitedDecodeStream(DirectResultAckSchema, req)) {
            acks.push(ack);
            if (acks.length === frames.length) req.end();
          }
        } catch {
          // a reset: the acks so far are the answer
        }
        resolve({ status, acks, rstCode: req.rstCode ?? 0 });
      })().catch(reject);
      for (const f of frames) req.write(f);
    });
  } finally {
    session.close();
  }
}

const frameOf = (seq: number, result: Uint8Array): Uint8Array =>
  sizeDelimitedEncode(DirectResultFrameSchema, create(DirectResultFrameSchema, { seq: BigInt(seq), result }));

describe("direct-reply listener: result streams", () => {
  const plain = serverWith();
  const postOnly = serverWith(undefined, false);
  const addresses: string[] = [];
  before(async () => {
    addresses.push(await plain.server.start(), await postOnly.server.start());
  });
  after(async () => {
    await plain.server.stop();
    await postOnly.server.stop();
  });

  test("each frame gets its own ack in order: delivered, refused (undecodable result) alone, then no call waiting", async () => {
    const call = plain.pending.register("job-f1", Date.now() + 10_000, new AbortController().signal);
    const answer = await streamFrames(addresses[0]!, INSTANCE, [
      frameOf(1, resultBytes("job-f1")),
      frameOf(2, Buffer.from([0xff, 0xff, 0xff])),
      frameOf(3, resultBytes("job-f1")),
    ]);
    assert.equal(answer.status, 200);
    assert.deepEqual(
      answer.acks.map((a) => [Number(a.seq), a.outcome, a.reason]),
      [
        [1, DirectResultOutcome.DELIVERED, ""],
        [2, DirectResultOutcome.REFUSED, "malformed"],
        [3, DirectResultOutcome.UNKNOWN, ""],
      ],
    );
    assert.equal((await call).jobId, "job-f1");
  });

  test("a frame over the limit ends the stream (too_large); another instance's stream is refused with 421", async () => {
    const big = await streamFrames(addresses[0]!, INSTANCE, [frameOf(1, Buffer.alloc(MAX_BYTES + 8_192))]);
    assert.deepEqual(big.acks, []);
    assert.equal(plain.refused.at(-1), "too_large");
    const other = await streamFrames(addresses[0]!, "another-gateway", [frameOf(1, resultBytes("job-f2"))]);
    assert.equal(other.status, 421);
    assert.equal(plain.refused.at(-1), "misdirected");
  });

  test("with streams off (SHOAL_DIRECT_REPLY_STREAMS=0) the stream path is 404 and a POST is still taken", async () => {
    assert.equal((await streamFrames(addresses[1]!, INSTANCE, [frameOf(1, resultBytes("job-f3"))])).status, 404);
    const call = postOnly.pending.register("job-f3", Date.now() + 10_000, new AbortController().signal);
    assert.deepEqual(await post(addresses[1]!, resultBytes("job-f3"), { [DIRECT_REPLY_GATEWAY_HEADER]: INSTANCE }), { status: 200, outcome: "delivered" });
    assert.equal((await call).jobId, "job-f3");
  });
});
