import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureModel } from "@shoal/models";

/**
 * A copy of the generated tiny encoder under another id with manifest fields of its own, e.g.
 * `{ matryoshka: true }` or `{ prompts: { query: "query: ", passage: "passage: " } }`: its weights
 * are random, so what such a model tests is the mapping (the cut, the prompt), not its quality.
 */
export async function tinyVariant(id: string, fields: Record<string, unknown>): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), "shoal-variant-")), id);
  await cp(await ensureModel("tiny"), dir, { recursive: true });
  const path = join(dir, "shoal-model.json");
  const manifest = JSON.parse(await readFile(path, "utf8")) as Record<string, unknown>;
  await writeFile(path, JSON.stringify({ ...manifest, ...fields, id }, null, 2));
  return dir;
}

/** E5's prompts, on the tiny encoder. */
export const E5_PROMPTS = { query: "query: ", passage: "passage: " } as const;
