import type { CatalogModel } from "../catalog.ts";

/** Revisions remembered per model id by {@link LiveModels.wasSuperseded}. */
const MAX_SUPERSEDED = 16;

/**
 * The catalog's `models` map, kept current by the registry follower: every caller that reads
 * `catalog.models.get(id)` at request time sees a model added, removed or repointed at once (a
 * synchronous update, so a caller never sees half of one). Iteration lists the served models only;
 * `get` and `has` also answer for an alias (the model it resolves to now), so every request path
 * resolves an alias exactly once, where it already looks the model up. On a worker, a removed model
 * stays reachable by `get` for a grace period (`retiredGraceMs`), so that jobs accepted before the
 * removal still run. It also remembers the revisions it stopped serving under each id (replaced or
 * removed), so that a job written for one of them is known to be behind the registry, not ahead.
 */
export class LiveModels extends Map<string, CatalogModel> {
  private readonly retired = new Map<string, { readonly model: CatalogModel; readonly untilMs: number }>();
  private readonly superseded = new Map<string, string[]>();
  private aliasTarget: (name: string) => string | undefined = () => undefined;
  private graceMs = 0;

  /** How aliases resolve (the registry state's `resolve`), and how long removed models stay reachable. */
  configure(resolveAlias: (name: string) => string | undefined, retiredGraceMs: number): void {
    this.aliasTarget = resolveAlias;
    this.graceMs = retiredGraceMs;
  }

  override get(name: string): CatalogModel | undefined {
    const direct = super.get(name);
    if (direct !== undefined) return direct;
    const target = this.aliasTarget(name);
    if (target !== undefined && target !== name) {
      const model = super.get(target);
      if (model !== undefined) return model;
    }
    return this.retiredModel(name);
  }

  override has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  /** The served model itself (no alias, no retired copy). */
  served(id: string): CatalogModel | undefined {
    return super.get(id);
  }

  /** Removes a served model; with a grace period it stays reachable by `get` until then. */
  retire(id: string, nowMs = Date.now()): void {
    const model = super.get(id);
    if (model === undefined) return;
    super.delete(id);
    this.supersede(model, undefined);
    if (this.graceMs > 0) this.retired.set(id, { model, untilMs: nowMs + this.graceMs });
  }

  /** Serves `model` (replacing a served or retired copy of the same id). */
  serve(model: CatalogModel): void {
    const previous = super.get(model.id);
    if (previous !== undefined) this.supersede(previous, model);
    this.retired.delete(model.id);
    super.set(model.id, model);
  }

  /**
   * Whether `revision` of model `id` was served here before a later record replaced or removed it
   * (the registry has moved past it), as opposed to one this process has not seen yet.
   */
  wasSuperseded(id: string, revision: string): boolean {
    return revision !== "" && (this.superseded.get(id)?.includes(revision) ?? false);
  }

  /**
   * The model `id` names (an alias resolved) when it can run a job written for `revision`: the
   * revision served now, any when either side has none, or the model served now when `revision` is
   * one this process has seen superseded (the registry is the truth: a job never runs on a replaced
   * revision once this process has seen the replace). Undefined for a revision not seen here yet.
   */
  atRevision(id: string, revision: string): CatalogModel | undefined {
    const m = this.get(id);
    if (m === undefined) return undefined;
    return revision === "" || m.revision === undefined || m.revision === revision || this.wasSuperseded(m.id, revision) ? m : undefined;
  }

  private supersede(old: CatalogModel, next: CatalogModel | undefined): void {
    if (old.revision === undefined || old.revision === "" || old.revision === next?.revision) return;
    const seen = (this.superseded.get(old.id) ?? []).filter((r) => r !== old.revision);
    seen.push(old.revision);
    // A few are plenty: a job outlives at most the replacements made within its deadline.
    this.superseded.set(old.id, seen.slice(-MAX_SUPERSEDED));
  }

  private retiredModel(id: string): CatalogModel | undefined {
    const r = this.retired.get(id);
    if (r === undefined) return undefined;
    if (Date.now() <= r.untilMs) return r.model;
    this.retired.delete(id);
    return undefined;
  }
}
