import { createHash } from "node:crypto";
import type { CatalogModel } from "../catalog.ts";

const identities = new WeakMap<CatalogModel, string>();

/**
 * A served model's identity: its id, registry revision (Hub commit, folder fingerprint), source,
 * ONNX variant and whole spec, hashed. A model replaced under the same id (another revision, source,
 * variant or manifest) has another identity; the same record materialized again has the same one.
 * The gateway's embedding cache keys its entries by it, a worker its loaded sessions (model-fleet.ts).
 */
export function modelIdentity(model: CatalogModel): string {
  let identity = identities.get(model);
  if (identity === undefined) {
    const whole = JSON.stringify([model.id, model.revision ?? "", model.source ?? "", model.onnxVariant ?? "", model.spec]);
    identity = createHash("sha256").update(whole).digest("base64url");
    identities.set(model, identity);
  }
  return identity;
}
