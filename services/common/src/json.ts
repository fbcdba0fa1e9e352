/** A parsed JSON or YAML mapping whose fields are not checked yet. */
export type JsonObject = Record<string, unknown>;

/** True for a mapping (not null, not an array), whose fields can then be read one by one. */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
