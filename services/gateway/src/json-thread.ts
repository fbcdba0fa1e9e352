/**
 * Body of the gateway's JSON thread (json-decoder.ts): turns a large Connect JSON request body
 * into the request's protobuf bytes — UTF-8 decoding, JSON.parse and protobuf-es' fromJson, ~60 ms
 * of one core for 7.8 MiB — away from the event loop every other call is served on (issue #52).
 */
import { parentPort } from "node:worker_threads";
import { fromJson, toBinary } from "@bufbuild/protobuf";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import type { FromJsonThread, ToJsonThread } from "./json-thread-protocol.ts";

const decoder = new TextDecoder("utf-8", { fatal: true });

function decode(msg: ToJsonThread): FromJsonThread {
  const method = InferenceService.method[msg.method];
  const name = method.input.typeName;
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(msg.body));
  } catch {
    // V8's message quotes the body: never echoed.
    return { id: msg.id, ok: false, message: `cannot decode message ${name} from JSON: the body is not valid UTF-8 JSON` };
  }
  try {
    const bytes = toBinary(method.input, fromJson(method.input, json as Parameters<typeof fromJson>[1]));
    return { id: msg.id, ok: true, bytes };
  } catch (err) {
    return { id: msg.id, ok: false, message: `cannot decode message ${name} from JSON: ${String((err as Error).message).slice(0, 200)}` };
  }
}

parentPort?.on("message", (msg: ToJsonThread) => {
  const out = decode(msg);
  parentPort?.postMessage(out, out.ok ? [out.bytes.buffer as ArrayBuffer] : []);
});
