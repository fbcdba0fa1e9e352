import type { ServiceImpl } from "@connectrpc/connect";
import type { Kafka } from "kafkajs";
import { type CatalogModel, type KafkaSettings, type Logger, shareSecurity } from "@shoal/common";
import type { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { createRecordReader } from "@shoal/kafka-share";
import type { ApiKeySpec } from "../api-keys.ts";
import type { ApiKeys } from "../auth.ts";
import type { Handler } from "../http-types.ts";
import { type BatchConfig, CHUNK_BYTES } from "./batch-config.ts";
import { sendError, tenantOf } from "./batch-http.ts";
import { createLineCall } from "./batch-line-call.ts";
import { linesOf } from "./batch-lines.ts";
import { createBatchOwners } from "./batch-owners.ts";
import { encodeRecord, resultFileId, stateKey } from "./batch-records.ts";
import { serveBatches } from "./batch-routes.ts";
import { runBatch } from "./batch-run.ts";
import { batchTopics, createBatchStore } from "./batch-store.ts";
import { serveFiles } from "./file-routes.ts";

export interface BatchApiDeps {
  readonly kafka: Kafka;
  readonly kafkaSettings: KafkaSettings;
  readonly logger: Logger;
  readonly config: BatchConfig;
  readonly instanceId: string;
  readonly apiKeys: ApiKeys;
  readonly apiKeySpecs: readonly ApiKeySpec[];
  /** The InferenceService's Embed, which each line of an embeddings batch calls on the batch lane. */
  readonly embed: ServiceImpl<typeof InferenceService>["embed"];
  readonly models: ReadonlyMap<string, CatalogModel>;
}

export interface BatchApi {
  /** The `/v1/files` and `/v1/batches` routes. */
  readonly handle: Handler;
  /** Reads the state, then joins the runners' group (batches start running). */
  start(): Promise<void>;
  /** Stops the runs (each saves what it finished), leaves the group, stops following the state. */
  stop(): Promise<void>;
}

/** The OpenAI-compatible Batch API (docs/batch.md): storage, runners and routes. */
export function createBatchApi(deps: BatchApiDeps): BatchApi {
  const log = deps.logger.child({ component: "batch-api" });
  const c = deps.config;
  const topics = batchTopics(c.topicPrefix);
  const security = shareSecurity(deps.kafkaSettings);
  const reader = createRecordReader({
    brokers: deps.kafkaSettings.brokers,
    clientId: `shoal-gateway-${deps.instanceId}-files`,
    maxRecordBytes: 2 * CHUNK_BYTES,
    ...(security ? { security } : {}),
  });
  const store = createBatchStore(deps.kafka, deps.logger, { topics, fileRetentionMs: c.fileRetentionMs, instanceId: deps.instanceId, reader });
  const call = createLineCall({ embed: deps.embed, models: deps.models, apiKeys: deps.apiKeySpecs, timeoutMs: c.lineTimeoutMs, attempts: c.lineAttempts });
  let chunkSeq = 0;

  async function run(id: string, signal: AbortSignal): Promise<void> {
    const view = store.state.batch(id);
    if (view === undefined) return;
    const batch = view.batch;
    log.info({ batch: id, status: view.progress?.status ?? "validating", nextLine: view.progress?.nextLine ?? 0 }, "batch run resumes");
    const end = await runBatch(
      {
        batch,
        owner: deps.instanceId,
        limits: { maxLinesInFlight: c.linesInFlight, chunkBytes: CHUNK_BYTES, checkpointMs: c.checkpointMs, maxLines: c.maxRequests, maxErrors: 100 },
        lines() {
          const file = store.state.upload(batch.inputFileId);
          return file === undefined ? undefined : linesOf(store.readChunks(file.chunks));
        },
        call: (line, s) => call(batch, line, s),
        writeChunk: (kind, bytes) => store.writeChunk(`${resultFileId(id, kind)}/${deps.instanceId}-${chunkSeq++}`, bytes),
        save: (p) => store.write(stateKey("progress", id), encodeRecord(p)),
        cancelled: () => store.state.batch(id)?.cancel !== undefined,
        nowMs: () => Date.now(),
      },
      view.progress,
      signal,
    );
    log.info({ batch: id, status: end.status, nextLine: end.nextLine, completed: end.completed, failed: end.failed }, "batch run ended");
  }

  const owners = createBatchOwners(deps.kafka, deps.logger, { topics, store, run });
  const routes = { store, maxFileBytes: c.maxFileBytes, retentionMs: c.fileRetentionMs, maxOpenPerTenant: c.maxOpenPerTenant };

  async function serve(req: Parameters<Handler>[0], res: Parameters<Handler>[1]): Promise<void> {
    const tenant = tenantOf(req, deps.apiKeys);
    const parts = (req.url ?? "/").split("?", 1)[0]!.split("/").slice(2).map(decodeURIComponent);
    const [collection, ...rest] = parts;
    const cleaned = rest.filter((p, i) => p !== "" || i < rest.length - 1);
    if (collection === "files") await serveFiles(req, res, tenant, cleaned, routes);
    else await serveBatches(req, res, tenant, cleaned, routes);
  }

  return {
    handle(req, res) {
      serve(req, res).catch((err: unknown) => {
        if (!(err instanceof Error && err.name === "BatchApiError")) log.debug({ err, url: req.url }, "batch API call refused or failed");
        sendError(req, res, err);
      });
    },
    async start() {
      await store.start();
      await owners.start();
    },
    async stop() {
      await owners.stop();
      await store.stop();
      await reader.close();
    },
  };
}
