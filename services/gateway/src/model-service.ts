import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Catalog, CatalogModel } from "@shoal/common";
import { Lane, Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ModelSchema, ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";
import { principalKey } from "./auth.ts";

const tasks: Record<string, Task> = { embed: Task.EMBED, rerank: Task.RERANK, classify: Task.CLASSIFY };

/** @param defaultLane the lane the caller's calls take when they name none */
function toModel(m: CatalogModel, defaultLane: Lane = Lane.INTERACTIVE): Model {
  return create(ModelSchema, {
    id: m.id,
    task: tasks[m.spec.task] ?? Task.UNSPECIFIED,
    dimensions: m.spec.dimensions,
    maxSequenceLength: m.spec.maxSequenceLength,
    pool: m.pool,
    normalizeDefault: m.spec.normalize,
    defaultLane,
  });
}

/** ModelService: what the catalog declares, limited to the models the caller's API key may use. */
export function createModelService(catalog: Catalog): ServiceImpl<typeof ModelService> {
  return {
    listModels(_req, ctx) {
      const principal = ctx.values.get(principalKey);
      const visible = [...catalog.models.values()].filter((m) => principal?.allows(m.id) ?? true);
      return { models: visible.map((m) => toModel(m, principal?.lane)) };
    },
    getModel(req, ctx) {
      if (req.id === "") throw new InvalidRequestError("id: required");
      const principal = ctx.values.get(principalKey);
      principal?.authorizeModel(req.id);
      const model = catalog.models.get(req.id);
      if (!model) throw new ModelNotFoundError(req.id);
      return { model: toModel(model, principal?.lane) };
    },
  };
}
