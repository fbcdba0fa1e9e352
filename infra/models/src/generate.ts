/**
 * Writes a Shoal model directory for a preset.
 *   node --import tsx infra/models/src/generate.ts --preset tiny|mini --out <dir>
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { getPreset, PRESET_NAMES } from "./presets.ts";
import { writeModelDir } from "./write-model-dir.ts";

const usage = `usage: generate.ts --preset ${PRESET_NAMES.join("|")} --out <dir>`;
const { values } = parseArgs({ options: { preset: { type: "string" }, out: { type: "string" }, help: { type: "boolean" } } });
if (values.help || !values.preset || !values.out) {
  console.error(usage);
  process.exit(values.help ? 0 : 2);
}
const preset = getPreset(values.preset);
const out = resolve(values.out);
console.log(`generating preset ${preset.name} (${preset.id}, seed ${preset.seed}) into ${out}`);
await writeModelDir(preset, out, { log: (line) => console.log(line) });
