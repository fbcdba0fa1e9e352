/** Messages between the gateway and its JSON thread (json-decoder.ts, json-thread.ts). */

/** The InferenceService methods whose requests the thread decodes. */
export type JsonMethod = "embed" | "rerank" | "classify" | "tokenize";

/** A request body to decode, moved (not copied) to the thread. */
export interface ToJsonThread {
  readonly id: number;
  readonly method: JsonMethod;
  readonly body: Uint8Array;
}

/** The request as protobuf bytes (moved back), or why the body is not one. */
export type FromJsonThread =
  | { readonly id: number; readonly ok: true; readonly bytes: Uint8Array }
  | { readonly id: number; readonly ok: false; readonly message: string };
