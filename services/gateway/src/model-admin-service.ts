import { stat } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  aliasKey,
  aliasRecordValue,
  batchingOf,
  modelKey,
  modelRecordValue,
  readModelManifest,
  sessionBytesOfFile,
  type ModelRegistry,
  type ModelSourceResolver,
  type RegistryRefusal,
} from "@shoal/common";
import type { WorkerStatus } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import type { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { RegistryModelSchema } from "@shoal/gen/shoal/v1/registry_pb.ts";
import { InvalidRequestError, RegistryRefusedError } from "./errors.ts";
import { toModel } from "./model-service.ts";

export interface ModelAdminDeps {
  readonly registry: ModelRegistry;
  /** Turns an AddModel source into a local folder and its revision (folders; `hf:` once a Hub client is plugged in). */
  readonly resolver: ModelSourceResolver;
  /** The live workers, as the status topic shows them (a model too large for every worker of its pool is refused). */
  readonly workers?: () => WorkerStatus[];
}

const DEFAULT_POOL = "default";

function refuse(refusal: RegistryRefusal | undefined): void {
  if (refusal !== undefined) throw new RegistryRefusedError(refusal);
}

/**
 * ModelAdminService: checks each change against this gateway's view of the registry, writes one
 * record and answers once this gateway has read it back (so its own next call sees the change).
 * Changes through one gateway are made one at a time; two gateways changing the same name at once
 * both write, and the later record wins.
 */
export function createModelAdminService(deps: ModelAdminDeps): ServiceImpl<typeof ModelAdminService> {
  const { registry } = deps;
  const { state, catalog } = registry;
  let turn: Promise<unknown> = Promise.resolve();
  /** Runs admin changes one at a time: each sees the one before it applied. */
  function serially<T>(change: () => Promise<T>): Promise<T> {
    const next = turn.then(change, change);
    turn = next.catch(() => undefined);
    return next;
  }

  /** Refuses a model no live worker of its pool can hold (budget below one session's estimate). */
  async function checkFits(pool: string, id: string, bytes: number): Promise<void> {
    const budgets = (deps.workers?.() ?? []).filter((w) => w.pool === pool && w.memoryBudgetBytes > 0n).map((w) => Number(w.memoryBudgetBytes));
    if (budgets.length === 0) return;
    const largest = Math.max(...budgets);
    if (bytes > largest) {
      refuse({
        code: "precondition",
        message: `model '${id}' needs about ${bytes} bytes, more than the memory budget of any worker of pool '${pool}' (largest ${largest}; SHOAL_MEMORY_BUDGET)`,
      });
    }
  }

  return {
    addModel: (req) =>
      serially(async () => {
        if (req.source === "") throw new InvalidRequestError("source: required (an absolute folder path, or hf:<org>/<name>[@<revision>])");
        const poolName = req.pool || DEFAULT_POOL;
        const pool = catalog.pools.get(poolName);
        if (pool === undefined)
          refuse({ code: "invalid", message: `pool: no pool '${poolName.slice(0, 80)}' in the catalog (pools: ${[...catalog.pools.keys()].join(", ")})` });
        if (pool?.jobTopics === "per-model") {
          // Its workers subscribe to one topic per model at start: a new model's jobs would reach none.
          refuse({
            code: "precondition",
            message: `pool: '${poolName}' has jobTopics: per-model, whose topics are fixed at start; add models to a per-lane pool, or to the catalog YAML of a new pool`,
          });
        }
        const batching = batchingOf(req.batching);
        if (typeof batching === "string") throw new InvalidRequestError(batching);
        if (req.id !== "") refuse(state.addProblem(req.id));
        // Resolved and read before anything is written: a refused source leaves the registry as it was.
        const variant = req.onnxVariant === "" ? {} : { onnxVariant: req.onnxVariant };
        const { dir, revision } = await deps.resolver(req.source, variant);
        const { spec, manifest } = await readModelManifest(dir, { ...variant, ...(req.id === "" ? {} : { id: req.id }) });
        const id = req.id || spec.id;
        refuse(state.addProblem(id));
        const memoryBytes = spec.memoryBytes ?? sessionBytesOfFile((await stat(spec.modelPath)).size);
        await checkFits(poolName, id, memoryBytes);
        // An hf: model's record carries what workers need to know it before they fetch its files
        // (on its first need): the manifest read here and a size to plan memory with.
        const hub = req.source.startsWith("hf:");
        const record = create(RegistryModelSchema, {
          id,
          source: req.source,
          onnxVariant: req.onnxVariant,
          ...(hub ? { manifestJson: JSON.stringify(manifest), memoryBytes: BigInt(memoryBytes) } : {}),
          revision,
          pool: poolName,
          pinned: req.pinned,
          ...(req.batching ? { batching: req.batching } : {}),
          addedUnixMs: BigInt(Date.now()),
        });
        await registry.write(modelKey(id), modelRecordValue(record));
        const served = catalog.models.get(id);
        if (served === undefined) throw new Error(`model '${id}' was written to the registry but is not served here (see this gateway's log)`);
        return { model: toModel(served, deps.workers?.() ?? [], undefined, state.aliasesOf(id)) };
      }),

    removeModel: (req) =>
      serially(async () => {
        if (req.id === "") throw new InvalidRequestError("id: required");
        refuse(state.removeProblem(req.id));
        await registry.write(modelKey(req.id), null);
        return {};
      }),

    setAlias: (req) =>
      serially(async () => {
        refuse(state.aliasProblem(req.alias, req.target));
        await registry.write(aliasKey(req.alias), aliasRecordValue(req.alias, req.target, Date.now()));
        return { model: state.resolve(req.alias) ?? "" };
      }),

    removeAlias: (req) =>
      serially(async () => {
        if (!state.aliases.has(req.alias)) refuse({ code: "not-found", message: `alias: no alias '${req.alias.slice(0, 80)}'` });
        await registry.write(aliasKey(req.alias), null);
        return {};
      }),
  };
}
