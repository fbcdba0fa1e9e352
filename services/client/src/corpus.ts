import { ConnectError } from "@connectrpc/connect";
import type { EmbedOptions, EmbedResult } from "./client.ts";

/** Where a corpus run stands; `onProgress` gets one after each finished batch. */
export interface CorpusProgress {
  /** Texts embedded so far. */
  readonly done: number;
  readonly total: number;
  readonly batchesDone: number;
  readonly batches: number;
}

export interface CorpusOptions extends EmbedOptions {
  /** Texts per request (keep it within the gateway's SHOAL_MAX_INPUTS). Default 64. */
  readonly batchSize?: number;
  /** Requests in flight at once. Default 4. */
  readonly concurrency?: number;
  readonly onProgress?: (progress: CorpusProgress) => void;
}

export interface CorpusResult {
  readonly model: string;
  readonly dimensions: number;
  /** One vector per text, in input order. */
  readonly vectors: Float32Array[];
  readonly usage: { readonly promptTokens: number; readonly totalTokens: number };
}

/**
 * Embeds `texts` in batches of `batchSize` with at most `concurrency` requests in flight, placing
 * each batch's vectors at its own offset so the result keeps input order whatever order batches
 * finish in. Each batch is one retried call (timeout per batch); the first batch that still fails
 * cancels the others and rejects the whole run.
 */
export async function embedCorpus(
  embedBatch: (batch: string[], opts: EmbedOptions) => Promise<EmbedResult>,
  texts: readonly string[],
  opts: CorpusOptions = {},
): Promise<CorpusResult> {
  const batchSize = opts.batchSize ?? 64;
  const concurrency = opts.concurrency ?? 4;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError("batchSize: expected an integer >= 1");
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError("concurrency: expected an integer >= 1");

  const total = texts.length;
  const batches = Math.ceil(total / batchSize);
  const vectors = new Array<Float32Array>(total);
  const usage = { promptTokens: 0, totalTokens: 0 };
  let model = "";
  let dimensions = 0;
  let next = 0;
  let done = 0;
  let batchesDone = 0;

  const stop = new AbortController();
  const onOuterAbort = (): void => stop.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onOuterAbort, { once: true });
  const { onProgress } = opts;
  const embedOpts: EmbedOptions = { normalize: opts.normalize, truncate: opts.truncate, lane: opts.lane, timeoutMs: opts.timeoutMs };

  async function lane(): Promise<void> {
    while (!stop.signal.aborted && next < batches) {
      const b = next++;
      const start = b * batchSize;
      const batch = texts.slice(start, start + batchSize);
      const res = await embedBatch(batch, { ...embedOpts, signal: stop.signal });
      if (res.vectors.length !== batch.length) throw new Error(`batch ${b}: ${res.vectors.length} vectors for ${batch.length} texts`);
      res.vectors.forEach((v, i) => {
        vectors[start + i] = v;
      });
      model = res.model;
      dimensions = res.dimensions;
      usage.promptTokens += res.usage.promptTokens;
      usage.totalTokens += res.usage.totalTokens;
      done += batch.length;
      batchesDone++;
      onProgress?.({ done, total, batchesDone, batches });
    }
  }

  try {
    await Promise.all(
      Array.from({ length: Math.min(concurrency, batches) }, () =>
        lane().catch((err: unknown) => {
          stop.abort(err);
          throw err;
        }),
      ),
    );
  } catch (err) {
    throw ConnectError.from(err);
  } finally {
    opts.signal?.removeEventListener("abort", onOuterAbort);
  }
  if (opts.signal?.aborted) throw ConnectError.from(opts.signal.reason);
  return { model, dimensions, vectors, usage };
}
