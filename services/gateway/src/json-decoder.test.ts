import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { EmbedRequestSchema } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { InvalidRequestError } from "./errors.ts";
import { createJsonDecoder } from "./json-decoder.ts";

describe("the JSON thread decodes large Connect JSON bodies off the event loop", () => {
  const decoder = createJsonDecoder();
  after(() => decoder.close());

  it("a 7.8 MiB Embed body becomes its EmbedRequest; the event loop stays free meanwhile", async () => {
    const inputs = Array.from({ length: 256 }, (_, i) => `t${i}${"x".repeat(31_990)}`);
    const body = Buffer.from(JSON.stringify({ model: "m", inputs, options: { truncate: true } }));
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    const started = performance.now();
    const bytes = await decoder.decode("embed", body);
    clearInterval(timer);
    const req = fromBinary(EmbedRequestSchema, bytes);
    assert.equal(req.model, "m");
    assert.deepEqual(req.inputs, inputs);
    assert.equal(req.options?.truncate, true);
    // Ticks kept coming while the thread worked (a blocked loop would have run none).
    assert.ok(ticks >= 3, `${ticks} ticks in ${(performance.now() - started).toFixed(0)} ms`);
  });

  it("malformed JSON and fields of the wrong type are InvalidRequestError, without echoing the body", async () => {
    const bad = async (body: string): Promise<string> => {
      const err = await decoder.decode("embed", Buffer.from(body)).then(
        () => assert.fail("decoded"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidRequestError, String(err));
      return err.message;
    };
    assert.equal(
      await bad(`{"model":"m","inputs":["secret text"],`),
      "cannot decode message shoal.v1.EmbedRequest from JSON: the body is not valid UTF-8 JSON",
    );
    assert.match(await bad(`{"model":"m","inputs":[42]}`), /^cannot decode message shoal\.v1\.EmbedRequest from JSON: .*inputs/);
    assert.match(await bad(`{"model":"m","nope":1}`), /nope/);
    // Still decoding after refusals.
    assert.equal(fromBinary(EmbedRequestSchema, await decoder.decode("embed", Buffer.from(`{"model":"ok"}`))).model, "ok");
  });
});
