import assert from "node:assert/strict";
import http2 from "node:http2";
import { test } from "node:test";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { createCors } from "./cors.ts";
import { createDualServer } from "./dual-server.ts";
import { createHttpFront } from "./http-front.ts";

/** Sends one gRPC request with `body` and reports the status it got and how the stream ended. */
function call(port: number, body: Buffer): Promise<{ grpcStatus: string | undefined; closed: boolean; ms: number }> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const started = performance.now();
  return new Promise((resolve) => {
    let grpcStatus: string | undefined;
    const timer = setTimeout(() => {
      session.destroy();
      resolve({ grpcStatus, closed: false, ms: performance.now() - started });
    }, 5_000);
    const stream = session.request({ ":method": "POST", ":path": "/shoal.v1.ModelService/GetModel", "content-type": "application/grpc", te: "trailers" });
    stream.on("trailers", (t) => (grpcStatus = String(t["grpc-status"])));
    stream.on("data", () => undefined);
    stream.on("error", () => undefined);
    stream.on("close", () => {
      clearTimeout(timer);
      session.close();
      resolve({ grpcStatus, closed: true, ms: performance.now() - started });
    });
    stream.end(body);
  });
}

test("a gRPC call answered before its upload was read still closes (no flow-control deadlock)", async () => {
  const connect = connectNodeAdapter({
    readMaxBytes: 1024 * 1024,
    routes: (r) => r.service(ModelService, { listModels: () => ({ models: [] }), getModel: () => ({}) }),
  });
  const noop = (): void => undefined;
  const server = createDualServer(createHttpFront({ cors: createCors(["*"]), openai: noop, console: noop, connect }));
  const { port } = await server.listen(0, "127.0.0.1");
  try {
    // A small message, then a frame header announcing 4 GiB, then more bytes than the 64 KiB
    // window: the server answers ResourceExhausted without reading the rest of the upload.
    const prefix = Buffer.from([0, 0, 0, 0, 2, 0x0a, 0x00, 0, 0xff, 0xff, 0xff, 0xff]);
    const out = await call(port, Buffer.concat([prefix, Buffer.alloc(200_000, 0x61)]));
    assert.equal(out.grpcStatus, "8", "ResourceExhausted (message over readMaxBytes)");
    assert.ok(out.closed, "the stream closed instead of hanging on its unread upload");
  } finally {
    await server.close();
  }
});
