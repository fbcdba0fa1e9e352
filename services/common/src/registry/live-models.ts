import type { CatalogModel } from "../catalog.ts";

/**
 * The catalog's `models` map, kept current by the registry follower: every caller that reads
 * `catalog.models.get(id)` at request time sees a model added, removed or repointed at once (a
 * synchronous update, so a caller never sees half of one). Iteration lists the served models only;
 * `get` and `has` also answer for an alias (the model it resolves to now), so every request path
 * resolves an alias exactly once, where it already looks the model up. On a worker, a removed model
 * stays reachable by `get` for a grace period (`retiredGraceMs`), so that jobs accepted before the
 * removal still run.
 */
export class LiveModels extends Map<string, CatalogModel> {
  private readonly retired = new Map<string, { readonly model: CatalogModel; readonly untilMs: number }>();
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
    if (this.graceMs > 0) this.retired.set(id, { model, untilMs: nowMs + this.graceMs });
  }

  /** Serves `model` (replacing a retired copy of the same id). */
  serve(model: CatalogModel): void {
    this.retired.delete(model.id);
    super.set(model.id, model);
  }

  private retiredModel(id: string): CatalogModel | undefined {
    const r = this.retired.get(id);
    if (r === undefined) return undefined;
    if (Date.now() <= r.untilMs) return r.model;
    this.retired.delete(id);
    return undefined;
  }
}
