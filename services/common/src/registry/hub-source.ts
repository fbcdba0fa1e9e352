import type { Logger } from "../logger.ts";
import { fetchHubModel, type FetchHubModelOptions } from "../hub/fetch-hub-model.ts";
import {
  HubDownloadError,
  HubEntryNotFoundError,
  HubGatedError,
  HubOfflineMissError,
  HubRepoNotFoundError,
  HubRevisionNotFoundError,
  HubUnavailableError,
  ModelSourceError,
} from "../hub/errors.ts";
import { shoalModelFiles } from "../hub/files.ts";
import { parseModelSource } from "../hub/model-source.ts";
import { onnxVariantFile } from "../hub-layout.ts";
import { createProgressPrinter } from "../hub/progress.ts";
import { type ModelSourceResolver, SourceRefusedError } from "./model-source.ts";

/** What the PyTorch sidecar reads besides the configuration: the weights, one file or shards. */
const SIDECAR_WEIGHT_FILES = ["model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors"];

/** What a Hub source resolver needs besides the environment (tests point it at a Hub-shaped server). */
export interface HubSourceOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly logger?: Logger;
  /** Overrides for the Hub client (endpoint, cache folder, token); unset ones come from `env`. */
  readonly hub?: Pick<FetchHubModelOptions, "endpoint" | "cacheDir" | "token" | "offline">;
}

/**
 * Resolves `hf:<org>/<name>[@<revision>]` through the Hub client into the huggingface_hub cache:
 * the snapshot folder and the commit sha it holds. A registry record names the commit sha, so every
 * process that applies it fetches exactly the revision the gateway resolved, whatever `main` is now.
 * Hub errors become {@link SourceRefusedError}s the gateway maps once at its edge.
 */
export function createHubSourceResolver(options: HubSourceOptions = {}): ModelSourceResolver {
  const log = options.logger?.child({ component: "hub" });
  return async (source, opts) => {
    let parsed: ReturnType<typeof parseModelSource>;
    try {
      parsed = parseModelSource(source);
    } catch (err) {
      throw new SourceRefusedError("invalid", `source: ${(err as Error).message}`);
    }
    if (parsed.kind !== "hf") throw new SourceRefusedError("invalid", `source: '${source.slice(0, 200)}' is not an hf: id`);
    const printer = log === undefined ? undefined : createProgressPrinter((line) => log.info({ repo: parsed.repo }, line), { intervalMs: 2000 });
    try {
      const model = await fetchHubModel({
        repo: parsed.repo,
        revision: opts.revision ?? parsed.revision,
        ...(options.env === undefined ? {} : { env: options.env }),
        ...options.hub,
        ...(printer === undefined ? {} : { onProgress: printer }),
        ...(opts.signal === undefined ? {} : { signal: opts.signal }),
        files: shoalModelFiles({
          ...(opts.onnxVariant === undefined ? {} : { onnxFile: onnxVariantFile(opts.onnxVariant) }),
          ...(opts.runtime === "sidecar" ? { extra: SIDECAR_WEIGHT_FILES } : {}),
        }),
      });
      if (model.downloadedBytes > 0) log?.info({ repo: model.repo, commit: model.commitSha, bytes: model.downloadedBytes }, "model fetched from the Hub");
      return { dir: model.dir, revision: model.commitSha };
    } catch (err) {
      throw refusal(err);
    }
  };
}

/** The refusal a Hub client error stands for; anything else passes through unchanged. */
function refusal(err: unknown): unknown {
  if (err instanceof ModelSourceError) return new SourceRefusedError("invalid", `source: ${err.message}`);
  if (err instanceof HubRepoNotFoundError || err instanceof HubRevisionNotFoundError || err instanceof HubEntryNotFoundError) {
    return new SourceRefusedError("not-found", err.message);
  }
  if (err instanceof HubGatedError) return new SourceRefusedError("denied", err.message);
  if (err instanceof HubOfflineMissError) return new SourceRefusedError("precondition", err.message);
  if (err instanceof HubDownloadError || err instanceof HubUnavailableError) return new SourceRefusedError("unavailable", err.message);
  return err;
}
