/**
 * Composite models: a reranker or classifier that owns no weights of its own and scores through a
 * real embedder of the same catalog (issue #48 item 4). No reachable registry ships a real
 * cross-encoder or text classifier, so the default fleet ranks and classifies with embeddings:
 *
 * ```yaml
 * - id: bge-small-ranker            # a bi-encoder ranker
 *   biEncoder: { embedder: bge-small-en-v1.5 }
 * - id: support-intent              # a zero-shot classifier
 *   zeroShot:
 *     embedder: bge-small-en-v1.5
 *     temperature: 0.05             # optional, default 0.05
 *     labels:                       # label name: what a text of that label is about
 *       billing: "a question about an invoice, a charge, a payment or a refund"
 *       bug: "a report that the product is broken, crashes or shows an error"
 * ```
 *
 * Both take `id` (required), `pool` (default: the embedder's, and it must be that one: the worker
 * runs the composite beside its embedder) and `pinned`; nothing else (no path, memory, runtime or
 * batching: the embedder's runner batches their texts with its own calls).
 */
import { isJsonObject } from "./json.ts";
import type { ClassifyModelSpec, EmbedModelSpec, ModelSpec, RerankModelSpec } from "./model-manifest.ts";

/** How a zero-shot classifier describes one label: its name (what Classify returns) and its text. */
export interface ZeroShotLabel {
  readonly name: string;
  readonly description: string;
}

/**
 * What a composite computes through its embedder:
 * - `bi-encoder`: score(query, document) = cosine(embed(query with the embedder's query prompt),
 *   embed(document with its passage prompt)), a value in [-1, 1] (no sigmoid);
 * - `zero-shot`: scores = softmax over labels of cosine(embed(text), embed(label description)) /
 *   temperature, both sides embedded as for classification (see the worker's promptFor).
 */
export type CompositeScoring =
  | { readonly kind: "bi-encoder"; readonly embedder: string }
  | { readonly kind: "zero-shot"; readonly embedder: string; readonly temperature: number; readonly labels: readonly ZeroShotLabel[] };

/**
 * The default zero-shot temperature. Cosines between a text and short label descriptions from a
 * small embedder sit in a narrow band (BGE-small: roughly 0.4–0.8), and the winning label leads by
 * a few hundredths: at 0.05 a lead of 0.05 is a factor e (≈ 0.73 vs 0.27 between two labels) and a
 * lead of 0.15 gives ≈ 0.95, so the scores read as confidences. At 1 every label would score
 * about 1/n; at 0.01 every call would look certain. The ranking (top-1) never depends on it.
 */
export const DEFAULT_ZERO_SHOT_TEMPERATURE = 0.05;

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const KINDS = { biEncoder: "bi-encoder", zeroShot: "zero-shot" } as const;
type KindKey = keyof typeof KINDS;
const ENTRY_FIELDS = new Set(["id", "pool", "pinned", "biEncoder", "zeroShot"]);

/** A composite catalog entry as read, before its embedder is looked up. */
export interface CompositeEntry {
  readonly where: string;
  readonly id: string;
  /** Undefined: the embedder's pool. */
  readonly pool: string | undefined;
  readonly pinned: boolean;
  readonly scoring: CompositeScoring;
}

/** Whether a raw catalog entry declares a composite (`biEncoder` or `zeroShot`). */
export function isCompositeEntry(raw: Record<string, unknown>): boolean {
  return raw["biEncoder"] !== undefined || raw["zeroShot"] !== undefined;
}

/**
 * Reads a composite entry's own fields; every problem names the file, the entry and the field.
 * @returns the entry, or undefined when a problem makes it unusable
 */
export function parseCompositeEntry(raw: Record<string, unknown>, where: string, problems: string[]): CompositeEntry | undefined {
  const before = problems.length;
  const kinds = (Object.keys(KINDS) as KindKey[]).filter((k) => raw[k] !== undefined);
  if (kinds.length > 1) problems.push(`${where}: give one of biEncoder or zeroShot, not both`);
  for (const key of Object.keys(raw)) {
    if (!ENTRY_FIELDS.has(key)) {
      problems.push(
        `${where}.${key}: not allowed on a ${KINDS[kinds[0]!]} model (it has no weights of its own and batches in its embedder's runner; set it on the embedder)`,
      );
    }
  }
  const id = raw["id"];
  if (typeof id !== "string" || !NAME.test(id)) problems.push(`${where}.id: required for a composite model, must match ${NAME}`);
  const pool = raw["pool"];
  if (pool !== undefined && typeof pool !== "string") problems.push(`${where}.pool: expected a pool name`);
  const pinned = raw["pinned"] ?? false;
  if (typeof pinned !== "boolean") problems.push(`${where}.pinned: expected true or false`);
  const key = kinds[0]!;
  const body = raw[key];
  const at = `${where}.${key}`;
  let scoring: CompositeScoring | undefined;
  if (!isJsonObject(body)) problems.push(`${at}: expected a mapping`);
  else scoring = key === "biEncoder" ? parseBiEncoder(body, at, problems) : parseZeroShot(body, at, problems);
  if (problems.length > before || scoring === undefined) return undefined;
  return { where, id: id as string, pool: pool as string | undefined, pinned: pinned === true, scoring };
}

function embedderField(body: Record<string, unknown>, at: string, problems: string[]): string {
  const e = body["embedder"];
  if (typeof e === "string" && e !== "") return e;
  problems.push(`${at}.embedder: required, the id of an embed model of this catalog`);
  return "";
}

function parseBiEncoder(body: Record<string, unknown>, at: string, problems: string[]): CompositeScoring {
  for (const key of Object.keys(body)) if (key !== "embedder") problems.push(`${at}.${key}: unknown field (expected embedder)`);
  return { kind: "bi-encoder", embedder: embedderField(body, at, problems) };
}

function parseZeroShot(body: Record<string, unknown>, at: string, problems: string[]): CompositeScoring {
  for (const key of Object.keys(body)) {
    if (!["embedder", "temperature", "labels"].includes(key)) problems.push(`${at}.${key}: unknown field (expected embedder, temperature, labels)`);
  }
  const embedder = embedderField(body, at, problems);
  const t = body["temperature"] ?? DEFAULT_ZERO_SHOT_TEMPERATURE;
  const temperature = typeof t === "number" && Number.isFinite(t) && t > 0 && t <= 10 ? t : undefined;
  if (temperature === undefined) problems.push(`${at}.temperature: expected a number in (0, 10] (got ${JSON.stringify(t)})`);
  const rawLabels = body["labels"];
  const labels: ZeroShotLabel[] = [];
  if (!isJsonObject(rawLabels) || Object.keys(rawLabels).length < 2) {
    problems.push(`${at}.labels: expected a mapping of at least 2 label names to descriptions`);
  } else {
    for (const [name, description] of Object.entries(rawLabels)) {
      if (name.trim() === "") problems.push(`${at}.labels: a label name is empty`);
      else if (typeof description !== "string" || description.trim() === "") {
        problems.push(`${at}.labels.${name}: expected a non-empty description (what a text of this label is about)`);
      } else labels.push({ name, description });
    }
  }
  return { kind: "zero-shot", embedder, temperature: temperature ?? DEFAULT_ZERO_SHOT_TEMPERATURE, labels };
}

/** The embedder-derived model spec of a composite: files and limits of its embedder, the task and width of its own. */
export function compositeSpec(id: string, scoring: CompositeScoring, embedder: EmbedModelSpec): RerankModelSpec | ClassifyModelSpec {
  // The embedder's files, paths and limits (whatever base fields it has); its embed-only fields go.
  const { task: _task, dimensions: _d, pooling: _p, normalize: _n, prompts: _pr, matryoshka: _m, memoryBytes: _mb, source: _s, ...base } = embedder;
  const source = { composite: scoring.kind, embedder: embedder.id };
  const common = { ...base, id, pooling: "none" as const, normalize: false as const, memoryBytes: undefined, source, hiddenSize: undefined };
  if (scoring.kind === "bi-encoder") return { ...common, task: "rerank", dimensions: 1, numLabels: 1, scoreActivation: "none" };
  const labels = scoring.labels.map((l) => l.name);
  return { ...common, task: "classify", dimensions: labels.length, numLabels: labels.length, labels, problemType: "single_label" };
}

/**
 * Looks a composite's embedder up among the catalog's models.
 * @returns the embedder's spec and pool, or undefined (with a problem naming the field) when it
 *   is missing, not an embedder, or in another pool than the entry names
 */
export function findEmbedder(
  entry: CompositeEntry,
  models: ReadonlyMap<string, { readonly spec: ModelSpec; readonly pool: string }>,
  problems: string[],
  composites: readonly CompositeEntry[] = [],
): { spec: EmbedModelSpec; pool: string } | undefined {
  const field = `${entry.where}.${entry.scoring.kind === "bi-encoder" ? "biEncoder" : "zeroShot"}.embedder`;
  const name = entry.scoring.embedder;
  const m = models.get(name);
  const composite = composites.find((c) => c.id === name);
  if (m === undefined && composite !== undefined) {
    const task = composite.scoring.kind === "bi-encoder" ? "rerank" : "classify";
    problems.push(`${field}: '${name}' is a ${task} model (a composite itself); a composite scores through an embed model`);
    return undefined;
  }
  if (m === undefined) {
    problems.push(`${field}: no model '${name}' in the catalog (name an embed model listed under models)`);
    return undefined;
  }
  if (m.spec.task !== "embed") {
    problems.push(`${field}: '${name}' is a ${m.spec.task} model; a composite scores through an embed model`);
    return undefined;
  }
  if (entry.pool !== undefined && entry.pool !== m.pool) {
    problems.push(`${entry.where}.pool: '${entry.pool}' differs from the pool '${m.pool}' of its embedder '${name}' (a composite runs beside its embedder)`);
    return undefined;
  }
  return { spec: m.spec, pool: m.pool };
}
