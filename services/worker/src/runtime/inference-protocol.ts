/** Messages between the inference threads' owner (parent) and an inference thread. Plain data only. */
import type { InferenceErrorReason } from "./errors.ts";
import type { ExecutionProviderChoice, SessionModel, SessionSettings } from "./onnx-session.ts";
import type { PackedGroup } from "./packed-group.ts";

/** `workerData` of an inference thread. */
export interface ThreadInit {
  readonly model: SessionModel;
  readonly settings: SessionSettings;
}

/** Parent → thread. */
export type ToThread =
  /** Run every group (one session.run each) and answer with one `result` or `error`. */
  | { readonly type: "run"; readonly id: number; readonly groups: readonly PackedGroup[] }
  /** Finish the current run, release the session, answer `closed`, exit. */
  | { readonly type: "close" };

/** Thread → parent. */
export type FromThread =
  | { readonly type: "ready"; readonly provider: ExecutionProviderChoice; readonly fallbackReason: string | undefined }
  | { readonly type: "load-failed"; readonly path: string; readonly problems: readonly string[] }
  /** `vectors`: rows in the order of the run's groups then sequences; buffer transferred. */
  | { readonly type: "result"; readonly id: number; readonly vectors: Float32Array; readonly inferenceMs: number }
  | { readonly type: "error"; readonly id: number; readonly reason: InferenceErrorReason; readonly message: string }
  | { readonly type: "closed" };
