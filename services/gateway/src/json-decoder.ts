import { Worker } from "node:worker_threads";
import { InvalidRequestError } from "./errors.ts";
import type { FromJsonThread, JsonMethod, ToJsonThread } from "./json-thread-protocol.ts";

/** Decodes large Connect JSON request bodies into protobuf bytes on a thread of its own. */
export interface JsonDecoder {
  /** @throws InvalidRequestError when the body is not the method's request as JSON */
  decode(method: JsonMethod, body: Buffer): Promise<Uint8Array>;
  /** Stops the thread; later decodes start a new one. */
  close(): Promise<void>;
}

const THREAD_ENTRY = new URL("./json-thread-entry.mjs", import.meta.url);

/**
 * One thread, started on first use and again after a crash (its pending decodes fail). Bodies are
 * decoded one at a time, in arrival order: large bodies wait for each other, never for the event
 * loop, and never make it wait.
 */
export function createJsonDecoder(entry: URL = THREAD_ENTRY): JsonDecoder {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, { resolve: (bytes: Uint8Array) => void; reject: (err: Error) => void }>();

  function start(): Worker {
    const w = new Worker(entry);
    w.unref();
    w.on("message", (msg: FromJsonThread) => {
      const p = pending.get(msg.id);
      if (p === undefined) return;
      pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.bytes);
      else p.reject(new InvalidRequestError(msg.message));
    });
    const fail = (err: Error): void => {
      if (worker === w) worker = undefined;
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    };
    w.on("error", fail);
    w.on("exit", (code) => fail(new Error(`the JSON thread exited (${code})`)));
    return w;
  }

  return {
    decode(method, body) {
      worker ??= start();
      const id = nextId++;
      // Moved, not copied, when the buffer is the body's alone (large bodies are: never pooled).
      const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength;
      const msg: ToJsonThread = { id, method, body: own ? body : Uint8Array.from(body) };
      return new Promise<Uint8Array>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker!.postMessage(msg, [msg.body.buffer as ArrayBuffer]);
      });
    },
    async close() {
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
