import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Catalog, CatalogModel } from "@shoal/common";
import { Lane, Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { ModelSchema, type ModelService, ResidencyState, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";
import { principalKey } from "./auth.ts";
import { describeScoring } from "./model-scoring.ts";

const tasks: Record<string, Task> = { embed: Task.EMBED, rerank: Task.RERANK, classify: Task.CLASSIFY };

/**
 * A catalog model with its state across the cluster's live workers.
 * @param defaultLane the lane the caller's calls take when they name none
 */
export function toModel(m: CatalogModel, workers: readonly WorkerStatus[], defaultLane: Lane = Lane.INTERACTIVE, aliases: readonly string[] = []): Model {
  const copies = workers.flatMap((w) =>
    w.pool !== m.pool
      ? []
      : w.models
          .filter((r) => r.model === m.id)
          .map((r) => ({ workerId: w.workerId, state: r.state, loadCount: r.loadCount, lastColdStartMs: r.lastColdStartMs, lastUsed: r.lastUsedUnixMs })),
  );
  // Evicted copies count towards the load history but are not replicas.
  const replicas = copies.filter((r) => r.state !== ResidencyState.EVICTED);
  // The most recently used copy's cold start stands for "the last one".
  const latest = copies.filter((r) => r.lastColdStartMs > 0).sort((a, b) => Number(b.lastUsed - a.lastUsed))[0];
  return create(ModelSchema, {
    labels: m.spec.task === "classify" ? [...m.spec.labels] : [],
    pinned: m.pinned,
    memoryBytes: BigInt(m.memoryBytes ?? 0),
    replicas: replicas.map(({ lastUsed: _lastUsed, ...r }) => r),
    loadCount: copies.reduce((n, r) => n + r.loadCount, 0n),
    lastColdStartMs: latest?.lastColdStartMs ?? 0,
    id: m.id,
    task: tasks[m.spec.task] ?? Task.UNSPECIFIED,
    dimensions: m.spec.dimensions,
    maxSequenceLength: m.spec.maxSequenceLength,
    pool: m.pool,
    normalizeDefault: m.spec.normalize,
    defaultLane,
    generated: m.spec.origin === "generated",
    origin: describeOrigin(m),
    source: m.source ?? (m.composite === undefined ? m.spec.dir : ""),
    revision: m.revision ?? "",
    aliases: [...aliases],
    scoring: describeScoring(m),
    ...(m.spec.task === "embed" ? { matryoshka: m.spec.matryoshka, queryPrompt: m.spec.prompts.query ?? "", passagePrompt: m.spec.prompts.passage ?? "" } : {}),
  });
}

/** A one-line provenance for people, from the manifest's `source` (opaque to the runtime otherwise). */
export function describeOrigin(m: CatalogModel): string {
  if (m.composite !== undefined) return `${m.composite.kind} over ${m.composite.embedder}${m.spec.origin === "generated" ? " (generated)" : ""}`;
  const s = m.spec.source ?? {};
  const str = (k: string): string | undefined => (typeof s[k] === "string" ? (s[k] as string) : undefined);
  if (m.spec.origin === "generated") return `generated${str("preset") ? ` preset ${str("preset")}` : ""}`;
  const upstream = str("upstreamModel") ?? str("huggingface");
  const where = str("maven")
    ? `maven ${str("maven")}`
    : str("package")
      ? `pypi ${str("package")}${str("packageVersion") ? ` ${str("packageVersion")}` : ""}`
      : "pretrained";
  const detail = [upstream, s["quantized"] === true ? "int8" : undefined].filter((x) => x !== undefined).join(", ");
  return detail === "" ? where : `${where} (${detail})`;
}

/**
 * ModelService: what the catalog declares with each model's state on the live workers, limited to
 * the models the caller's API key may use.
 */
export function createModelService(
  catalog: Catalog,
  workers: () => WorkerStatus[] = () => [],
  /** The registry's aliases of a model (ListModels shows them). */
  aliasesOf: (id: string) => string[] = () => [],
): ServiceImpl<typeof ModelService> {
  return {
    listModels(_req, ctx) {
      const principal = ctx.values.get(principalKey);
      const visible = [...catalog.models.values()].filter((m) => principal?.allows(m.id) ?? true);
      const live = workers();
      return { models: visible.map((m) => toModel(m, live, principal?.lane, aliasesOf(m.id))) };
    },
    getModel(req, ctx) {
      if (req.id === "") throw new InvalidRequestError("id: required");
      const principal = ctx.values.get(principalKey);
      principal?.authorizeModel(req.id);
      const model = catalog.models.get(req.id);
      if (!model) throw new ModelNotFoundError(req.id);
      return { model: toModel(model, workers(), principal?.lane, aliasesOf(model.id)) };
    },
  };
}
