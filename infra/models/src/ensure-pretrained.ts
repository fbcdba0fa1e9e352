/**
 * Builds the pretrained all-MiniLM-L6-v2 model directory if missing and prints its path.
 *   node --import tsx infra/models/src/ensure-pretrained.ts [--print-path] [--if-built]
 * Progress goes to stderr. --if-built never builds: it prints the directory when it is there
 * (exit 0) and nothing otherwise (exit 1), for scripts that use the real model when available.
 */
import { parseArgs } from "node:util";
import { ensurePretrained, findPretrained } from "./pretrained.ts";

const { values } = parseArgs({
  options: { "print-path": { type: "boolean", default: false }, "if-built": { type: "boolean", default: false } },
});
if (values["if-built"]) {
  const dir = await findPretrained();
  if (dir === undefined) process.exit(1);
  console.log(dir);
} else {
  const t0 = performance.now();
  let built = false;
  const dir = await ensurePretrained({
    onResult: (b) => {
      built = b;
    },
  });
  if (values["print-path"]) console.log(dir);
  else console.log(`all-minilm-l6-v2 ${dir} (${built ? `built in ${((performance.now() - t0) / 1000).toFixed(1)} s` : "cached"})`);
}
