import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { Logger } from "@shoal/common";
import { ListModelsRequestSchema, ModelService } from "@shoal/gen/shoal/v1/model_pb.ts";
import { mapErrors } from "./map-errors.ts";

test("a caller that resets its HTTP/2 stream with INTERNAL_ERROR is Canceled, not an internal error (real server, raw h2 client)", async () => {
  // A recording stand-in for the pino logger: only what mapErrors calls.
  const lines: string[] = [];
  const record = (_obj: unknown, msg: string): void => void lines.push(msg);
  const logger = { child: () => ({ error: record, warn: record, info: record }) } as unknown as Logger;
  const codes: Code[] = [];
  const observe: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      codes.push(ConnectError.from(err).code);
      throw err;
    }
  };
  let entered: () => void = () => undefined;
  const inHandler = new Promise<void>((r) => (entered = r));
  const server = http2.createServer(
    connectNodeAdapter({
      interceptors: [observe, mapErrors(logger)],
      routes(router) {
        router.service(ModelService, {
          // Waits for the caller, as a call waiting for its job's result does, and fails with the abort reason.
          listModels: (_req, ctx) =>
            new Promise((_, reject) => {
              entered();
              ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
            }),
          getModel: () => ({}),
        });
      },
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  try {
    const stream = session.request({ ":method": "POST", ":path": "/shoal.v1.ModelService/ListModels", "content-type": "application/grpc", te: "trailers" });
    stream.on("error", () => undefined);
    const body = toBinary(ListModelsRequestSchema, create(ListModelsRequestSchema));
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    stream.end(frame);
    await inHandler;
    stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    for (let i = 0; i < 100 && codes.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(codes, [Code.Canceled]);
    assert.equal(lines.filter((l) => l.includes("internal error")).length, 0);
  } finally {
    session.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
