import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { RegistryRecordSchema, type RegistryModel, type RegistryRecord } from "@shoal/gen/shoal/v1/registry_pb.ts";

/** Model ids and alias names: what the catalog allows for ids, so that either can name a topic. */
export const REGISTRY_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** Longest alias chain followed (alias → alias → … → model). */
export const MAX_ALIAS_HOPS = 8;

/** Record key of a model: `model/<id>`. */
export function modelKey(id: string): string {
  return `model/${id}`;
}

/** Record key of an alias: `alias/<name>`. */
export function aliasKey(name: string): string {
  return `alias/${name}`;
}

/** Record key of a pool's seed marker: `seed/<pool>`. */
export function seedKey(pool: string): string {
  return `seed/${pool}`;
}

export function encodeRegistryRecord(record: RegistryRecord): Uint8Array {
  return toBinary(RegistryRecordSchema, record);
}

/** A registry record that cannot be applied (unknown key, undecodable or mismatched value). */
export class RegistryRecordError extends Error {
  override readonly name = "RegistryRecordError";
}

/** What one applied record changed. */
export type RegistryChange =
  | { readonly kind: "model"; readonly id: string; readonly model: RegistryModel | undefined }
  | { readonly kind: "alias"; readonly name: string; readonly target: string | undefined }
  | { readonly kind: "seed"; readonly pool: string };

/** Why an admin change is refused, as the gateway answers it (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition). */
export interface RegistryRefusal {
  readonly code: "invalid" | "not-found" | "exists" | "precondition";
  readonly message: string;
}

/**
 * The registry's state: what the compacted topic's records add up to, applied in log order (last
 * write per key wins, a tombstone removes). Pure: the Kafka follower feeds it, the admin service
 * asks it whether a change is allowed before writing one.
 */
export class RegistryState {
  readonly models = new Map<string, RegistryModel>();
  readonly aliases = new Map<string, string>();
  /** Each pool's last seed from a catalog YAML: the declaration's digest and the ids it wrote. */
  readonly seeded = new Map<string, { readonly digest: string; readonly models: readonly string[] }>();

  /** Applies one record; `value` null or empty is a tombstone. @throws RegistryRecordError */
  apply(key: string, value: Uint8Array | null): RegistryChange {
    const slash = key.indexOf("/");
    const kind = key.slice(0, slash);
    const name = key.slice(slash + 1);
    if (slash <= 0 || !REGISTRY_NAME.test(name)) throw new RegistryRecordError(`registry key '${key.slice(0, 80)}' is not model/, alias/ or seed/<name>`);
    let record: RegistryRecord | undefined;
    if (value !== null && value.length > 0) {
      try {
        record = fromBinary(RegistryRecordSchema, value);
      } catch (err) {
        throw new RegistryRecordError(`registry record ${key}: ${(err as Error).message}`);
      }
    }
    const entry = record?.entry;
    switch (kind) {
      case "model": {
        if (entry !== undefined && (entry.case !== "model" || entry.value.id !== name))
          throw new RegistryRecordError(`registry record ${key}: not model '${name}'`);
        if (entry?.case === "model") this.models.set(name, entry.value);
        else this.models.delete(name);
        return { kind: "model", id: name, model: entry?.case === "model" ? entry.value : undefined };
      }
      case "alias": {
        if (entry !== undefined && (entry.case !== "alias" || entry.value.name !== name))
          throw new RegistryRecordError(`registry record ${key}: not alias '${name}'`);
        if (entry?.case === "alias") this.aliases.set(name, entry.value.target);
        else this.aliases.delete(name);
        return { kind: "alias", name, target: entry?.case === "alias" ? entry.value.target : undefined };
      }
      case "seed": {
        // A seed marker is never removed: a tombstone leaves the last seed in place.
        if (entry?.case === "seed") this.seeded.set(name, { digest: entry.value.catalogDigest, models: [...entry.value.models] });
        return { kind: "seed", pool: name };
      }
      default:
        throw new RegistryRecordError(`registry key '${key.slice(0, 80)}' is not model/, alias/ or seed/<name>`);
    }
  }

  /** The model id `name` stands for: itself when a model, else its alias chain's end; undefined when dangling, looping or too long. */
  resolve(name: string): string | undefined {
    let current = name;
    for (let hop = 0; hop <= MAX_ALIAS_HOPS; hop++) {
      if (this.models.has(current)) return current;
      const next = this.aliases.get(current);
      if (next === undefined) return undefined;
      current = next;
    }
    return undefined;
  }

  /** Aliases that resolve to model `id` (directly or through other aliases), sorted. */
  aliasesOf(id: string): string[] {
    return [...this.aliases.keys()].filter((a) => this.resolve(a) === id).sort();
  }

  /** Why `id` cannot be added, or undefined. */
  addProblem(id: string): RegistryRefusal | undefined {
    if (!REGISTRY_NAME.test(id)) return { code: "invalid", message: `id: '${id.slice(0, 80)}' must match ${REGISTRY_NAME}` };
    if (this.models.has(id)) return { code: "exists", message: `id: model '${id}' is already served (remove it first to replace it)` };
    if (this.aliases.has(id)) return { code: "exists", message: `id: '${id}' is an alias (of '${this.aliases.get(id)}')` };
    return undefined;
  }

  /** Why model `id` cannot be removed, or undefined: it must exist, and nothing may point at it. */
  removeProblem(id: string): RegistryRefusal | undefined {
    if (!this.models.has(id)) return { code: "not-found", message: `model '${id.slice(0, 80)}' is not in the registry` };
    const aliases = [...this.aliases].filter(([, target]) => target === id).map(([a]) => a);
    if (aliases.length > 0)
      return { code: "precondition", message: `alias ${aliases.map((a) => `'${a}'`).join(", ")} points at '${id}': repoint or remove it first` };
    const composites = [...this.models.values()].filter((m) => m.compositeJson !== "" && embedderOf(m) === id).map((m) => m.id);
    if (composites.length > 0)
      return { code: "precondition", message: `model ${composites.map((c) => `'${c}'`).join(", ")} scores through '${id}': remove it first` };
    return undefined;
  }

  /** Why alias `name` cannot point at `target`, or undefined: no model by that name, an existing target, no loop. */
  aliasProblem(name: string, target: string): RegistryRefusal | undefined {
    if (!REGISTRY_NAME.test(name)) return { code: "invalid", message: `alias: '${name.slice(0, 80)}' must match ${REGISTRY_NAME}` };
    if (target === "") return { code: "invalid", message: "target: required (a model id or another alias)" };
    if (this.models.has(name)) return { code: "exists", message: `alias: '${name}' is a model id` };
    if (!this.models.has(target) && !this.aliases.has(target)) return { code: "not-found", message: `target: no model or alias '${target.slice(0, 80)}'` };
    // Follow the chain from the target as it would be with the new alias in place.
    const chain = [name];
    let current = target;
    for (let hop = 0; hop <= MAX_ALIAS_HOPS; hop++) {
      if (current === name || chain.includes(current)) {
        return { code: "invalid", message: `alias loop: ${[...chain, current].join(" → ")}` };
      }
      if (this.models.has(current)) return undefined;
      chain.push(current);
      const next = this.aliases.get(current);
      if (next === undefined) return { code: "not-found", message: `target: alias '${current}' points at nothing` };
      current = next;
    }
    return { code: "invalid", message: `alias chain longer than ${MAX_ALIAS_HOPS}: ${chain.join(" → ")}` };
  }
}

/** The embedder a composite model record scores through ('' for a model with files of its own, or unreadable JSON). */
export function embedderOf(model: RegistryModel): string {
  if (model.compositeJson === "") return "";
  try {
    const parsed = JSON.parse(model.compositeJson) as { embedder?: unknown };
    return typeof parsed.embedder === "string" ? parsed.embedder : "";
  } catch {
    return "";
  }
}

/** A model record's value bytes. */
export function modelRecordValue(model: RegistryModel): Uint8Array {
  return encodeRegistryRecord(create(RegistryRecordSchema, { entry: { case: "model", value: model } }));
}

/** An alias record's value bytes. */
export function aliasRecordValue(name: string, target: string, nowUnixMs: number): Uint8Array {
  return encodeRegistryRecord(create(RegistryRecordSchema, { entry: { case: "alias", value: { name, target, updatedUnixMs: BigInt(nowUnixMs) } } }));
}

/** A seed marker's value bytes. */
export function seedRecordValue(pool: string, writer: string, nowUnixMs: number, catalogDigest = "", models: readonly string[] = []): Uint8Array {
  return encodeRegistryRecord(
    create(RegistryRecordSchema, { entry: { case: "seed", value: { pool, writer, seededUnixMs: BigInt(nowUnixMs), catalogDigest, models: [...models] } } }),
  );
}
