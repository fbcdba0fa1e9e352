import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Catalog, CatalogModel } from "@shoal/common";
import { Lane, Task } from "@shoal/gen/shoal/v1/common_pb.ts";
import { ModelSchema, ModelService, type Model } from "@shoal/gen/shoal/v1/model_pb.ts";
import { InvalidRequestError, ModelNotFoundError } from "./errors.ts";

const tasks: Record<string, Task> = { embed: Task.EMBED, rerank: Task.RERANK, classify: Task.CLASSIFY };

function toModel(m: CatalogModel): Model {
  return create(ModelSchema, {
    id: m.id,
    task: tasks[m.spec.task] ?? Task.UNSPECIFIED,
    dimensions: m.spec.dimensions,
    maxSequenceLength: m.spec.maxSequenceLength,
    pool: m.pool,
    normalizeDefault: m.spec.normalize,
    defaultLane: Lane.INTERACTIVE,
  });
}

/** ModelService: what the catalog declares. */
export function createModelService(catalog: Catalog): ServiceImpl<typeof ModelService> {
  return {
    listModels() {
      return { models: [...catalog.models.values()].map(toModel) };
    },
    getModel(req) {
      if (req.id === "") throw new InvalidRequestError("id: required");
      const model = catalog.models.get(req.id);
      if (!model) throw new ModelNotFoundError(req.id);
      return { model: toModel(model) };
    },
  };
}
