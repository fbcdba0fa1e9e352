import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type ModelBatchingSchema,
  RegistryModelSchema,
  type RegistryModel,
  type ModelBatching as ModelBatchingMessage,
} from "@shoal/gen/shoal/v1/registry_pb.ts";
import { SIDECARS, type CatalogModel, type ModelBatching, type ModelRuntime, type SidecarName } from "../catalog.ts";
import { compositeSpec, type CompositeScoring } from "../composite-model.ts";
import { repoCachePaths } from "../hub/cache.ts";
import { parseModelSource } from "../hub/model-source.ts";
import { isJsonObject, type JsonObject } from "../json.ts";
import { readModelDir, specOfManifest, type ModelSpec } from "../model-manifest.ts";
import type { ModelSourceResolver } from "./model-source.ts";

/** The catalog's batching overrides as the registry records them. */
export function batchingMessage(b: ModelBatching): MessageInitShape<typeof ModelBatchingSchema> {
  return {
    policy: b.policy ?? "",
    ...(b.maxBatchTokens !== undefined ? { maxBatchTokens: b.maxBatchTokens } : {}),
    ...(b.maxBatchItems !== undefined ? { maxBatchItems: b.maxBatchItems } : {}),
    ...(b.maxWaitMs !== undefined ? { maxWaitMs: b.maxWaitMs } : {}),
  };
}

/**
 * A registry message's batching overrides, checked as the catalog checks them.
 * @returns the overrides, or a problem naming the field
 */
export function batchingOf(m: ModelBatchingMessage | undefined): ModelBatching | string {
  if (m === undefined) return Object.freeze({});
  if (m.policy !== "" && m.policy !== "token-budget" && m.policy !== "fixed-window") return "batching.policy: expected token-budget or fixed-window";
  for (const [field, value] of [
    ["maxBatchTokens", m.maxBatchTokens],
    ["maxBatchItems", m.maxBatchItems],
  ] as const) {
    if (value !== undefined && value < 1) return `batching.${field}: expected a positive integer`;
  }
  return Object.freeze({
    ...(m.policy !== "" ? { policy: m.policy as "token-budget" | "fixed-window" } : {}),
    ...(m.maxBatchTokens !== undefined ? { maxBatchTokens: m.maxBatchTokens } : {}),
    ...(m.maxBatchItems !== undefined ? { maxBatchItems: m.maxBatchItems } : {}),
    ...(m.maxWaitMs !== undefined ? { maxWaitMs: m.maxWaitMs } : {}),
  });
}

/** The registry record of a catalog model (a YAML entry being seeded), at `revision`. */
export function recordOfCatalogModel(m: CatalogModel, revision: string, nowUnixMs: number): RegistryModel {
  return create(RegistryModelSchema, {
    id: m.id,
    // A composite has no files of its own: its source is its embedder's.
    source: m.composite === undefined ? (m.source ?? m.spec.dir) : "",
    revision: m.composite === undefined ? revision : "",
    pool: m.pool,
    pinned: m.pinned,
    batching: batchingMessage(m.batching),
    memoryBytes: BigInt(m.memoryBytes ?? 0),
    runtime: m.runtime?.kind === "sidecar" ? `sidecar:${m.runtime.sidecar}` : "",
    weightsDir: m.runtime?.kind === "sidecar" ? m.runtime.weightsDir : "",
    compositeJson: m.composite === undefined ? "" : JSON.stringify(m.composite),
    addedUnixMs: BigInt(nowUnixMs),
    onnxVariant: m.onnxVariant ?? "",
    manifestJson: m.manifest === undefined || !(m.source ?? "").startsWith("hf:") ? "" : JSON.stringify(m.manifest),
  });
}

/** How a process turns records into served models. */
export interface MaterializeOptions {
  /**
   * A worker's huggingface_hub cache: an `hf:` record that carries its manifest is served at once
   * from it, its files fetched into this cache on the model's first need. Unset (a gateway): the
   * files are fetched when the record is applied.
   */
  readonly hubCacheDir?: string;
}

/** An `hf:` record's spec from the manifest it carries, its files where the cache will hold them; undefined when it carries none. */
function lazyHubModel(r: RegistryModel, cacheDir: string): { spec: ModelSpec; manifest: JsonObject } | undefined {
  if (r.manifestJson === "" || r.revision === "" || !r.source.startsWith("hf:")) return undefined;
  const source = parseModelSource(r.source);
  if (source.kind !== "hf") return undefined;
  let manifest: unknown;
  try {
    manifest = JSON.parse(r.manifestJson);
  } catch (err) {
    throw new MaterializeError(`model '${r.id}': its record's manifest is not JSON (${(err as Error).message})`);
  }
  if (!isJsonObject(manifest)) throw new MaterializeError(`model '${r.id}': its record's manifest is not a JSON object`);
  return { spec: specOfManifest(repoCachePaths(cacheDir, source.repo).snapshot(r.revision), manifest), manifest };
}

/** A registry record that cannot become a served model on this process (its folder is missing here, its embedder is not served). */
export class MaterializeError extends Error {
  override readonly name = "MaterializeError";
}

function runtimeOf(r: RegistryModel): ModelRuntime {
  if (r.runtime === "" || r.runtime === "onnx") return { kind: "onnx" };
  const sidecar = r.runtime.slice("sidecar:".length);
  if (!r.runtime.startsWith("sidecar:") || !(SIDECARS as readonly string[]).includes(sidecar))
    throw new MaterializeError(`model '${r.id}': unknown runtime '${r.runtime}'`);
  return { kind: "sidecar", sidecar: sidecar as SidecarName, weightsDir: r.weightsDir };
}

/**
 * The served model a registry record stands for on this process: its source resolved here (at the
 * recorded revision) and its folder read, or — for a composite — its embedder found among the
 * models served now (`lookup`).
 * @throws MaterializeError, SourceRefusedError, ModelLoadError
 */
export async function materializeModel(
  r: RegistryModel,
  resolver: ModelSourceResolver,
  lookup: (id: string) => CatalogModel | undefined,
  options: MaterializeOptions = {},
): Promise<CatalogModel> {
  const batching = batchingOf(r.batching);
  if (typeof batching === "string") throw new MaterializeError(`model '${r.id}': ${batching}`);
  const common = {
    id: r.id,
    pool: r.pool,
    batching,
    pinned: r.pinned,
    source: r.source,
    revision: r.revision,
    ...(r.onnxVariant === "" ? {} : { onnxVariant: r.onnxVariant }),
  };
  if (r.compositeJson !== "") {
    const scoring = JSON.parse(r.compositeJson) as CompositeScoring;
    const embedder = lookup(scoring.embedder);
    if (embedder === undefined || embedder.spec.task !== "embed")
      throw new MaterializeError(`model '${r.id}': its embedder '${scoring.embedder}' is not served`);
    return Object.freeze({ ...common, pool: embedder.pool, spec: compositeSpec(r.id, scoring, embedder.spec), memoryBytes: undefined, composite: scoring });
  }
  const runtime = runtimeOf(r);
  const variant = r.onnxVariant === "" ? {} : { onnxVariant: r.onnxVariant };
  const lazy = options.hubCacheDir === undefined ? undefined : lazyHubModel(r, options.hubCacheDir);
  if (lazy !== undefined) {
    // Known from the record's manifest now; its files come on its first need (model-fleet.ts).
    let fetched: Promise<unknown> | undefined;
    const ensureFiles = async (): Promise<void> => {
      fetched ??= resolver(r.source, { revision: r.revision, ...variant, runtime: runtime.kind }).catch((err: unknown) => {
        fetched = undefined; // a failed fetch is tried again on the next need
        throw err;
      });
      await fetched;
    };
    const memoryBytes = r.memoryBytes > 0n ? Number(r.memoryBytes) : lazy.spec.memoryBytes;
    return Object.freeze({ ...common, spec: lazy.spec, memoryBytes, runtime, manifest: lazy.manifest, ensureFiles });
  }
  const { dir, revision } = await resolver(r.source, { ...(r.revision === "" ? {} : { revision: r.revision }), ...variant, runtime: runtime.kind });
  const spec = await readModelDir(dir, { runtime: runtime.kind, id: r.id, ...variant });
  const memoryBytes = r.memoryBytes > 0n ? Number(r.memoryBytes) : spec.memoryBytes;
  // A folder rewritten since it was added is served as it is now; the record keeps what was added.
  return Object.freeze({ ...common, revision: r.revision || revision, spec, memoryBytes, runtime });
}
