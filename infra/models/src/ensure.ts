/**
 * Builds presets into the model cache if missing and prints their directories.
 *   node --import tsx infra/models/src/ensure.ts [--preset tiny,mini] [--print-path]
 * Progress goes to stderr. stdout: "<preset> <dir> (cached|built)" per preset, or with
 * --print-path only the directories, one per line (for `$(...)` in scripts).
 */
import { parseArgs } from "node:util";
import { ensureModel } from "./ensure-model.ts";
import { getPreset, PRESET_NAMES } from "./presets.ts";

const { values } = parseArgs({
  options: { preset: { type: "string", default: PRESET_NAMES.join(",") }, "print-path": { type: "boolean", default: false } },
});
const names = values.preset
  .split(",")
  .map((s) => s.trim())
  .filter((s) => s !== "");
for (const name of names) getPreset(name); // fail fast on unknown names
for (const name of names) {
  const t0 = performance.now();
  let built = false;
  const dir = await ensureModel(name, {
    log: (line) => console.error(line),
    onResult: (b) => {
      built = b;
    },
  });
  if (values["print-path"]) console.log(dir);
  else console.log(`${name} ${dir} (${built ? `built in ${((performance.now() - t0) / 1000).toFixed(1)} s` : "cached"})`);
}
