/**
 * Where a catalog entry's files are: `path` (a model folder, relative to the catalog file) or
 * `source` (an absolute folder, or `hf:<org>/<name>[@<revision>]` fetched through the Hub client
 * into the huggingface_hub cache). One of the two.
 */
import { dirname, resolve } from "node:path";
import type { JsonObject } from "./json.ts";
import { parseModelSource } from "./hub/model-source.ts";
import { createHubSourceResolver } from "./registry/hub-source.ts";
import type { ResolveOptions } from "./registry/model-source.ts";

/** A located entry: its folder, and for an `hf:` source the id it names and the commit it resolved to. */
export interface LocatedEntry {
  readonly dir: string;
  /** The `source` as written (absent for `path` entries). */
  readonly source?: string;
  /** The Hub commit sha of an `hf:` source. */
  readonly revision?: string;
  /** The id an `hf:` source serves under when the entry names none: its repository's name, lower-cased. */
  readonly defaultId?: string;
}

/**
 * Reads `path` / `source` of one entry; problems (each naming the field) go to `problems`.
 * @param expand expands `${VAR}` in a string field
 */
export async function locateEntry(
  raw: JsonObject,
  file: string,
  env: NodeJS.ProcessEnv,
  where: string,
  problems: string[],
  expand: (value: string, field: string) => string,
  hints: Pick<ResolveOptions, "onnxVariant" | "runtime"> = {},
): Promise<LocatedEntry | undefined> {
  const path = raw["path"];
  const source = raw["source"];
  if (path !== undefined && source !== undefined) return void problems.push(`${where}: give path or source, not both`);
  if (typeof path === "string") return { dir: resolve(dirname(file), expand(path, `${where}.path`)) };
  if (typeof source !== "string") return void problems.push(`${where}.path: required string (or source: hf:<org>/<name>[@<revision>])`);
  const expanded = expand(source, `${where}.source`);
  let parsed: ReturnType<typeof parseModelSource>;
  try {
    parsed = parseModelSource(expanded);
  } catch (err) {
    return void problems.push(`${where}.source: ${(err as Error).message}`);
  }
  if (parsed.kind === "folder") return { dir: resolve(dirname(file), parsed.path), source: resolve(dirname(file), parsed.path) };
  try {
    const { dir, revision } = await createHubSourceResolver({ env })(expanded, hints);
    const name = parsed.repo.slice(parsed.repo.indexOf("/") + 1).toLowerCase();
    return { dir, source: expanded, revision, defaultId: name };
  } catch (err) {
    return void problems.push(`${where}.source: ${(err as Error).message}`);
  }
}
