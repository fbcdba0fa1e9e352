import type { RunGroup } from "./inference-threads.ts";

/**
 * Why a group cannot run, or undefined: packGroup's checks without packing, for runtimes that do
 * not pack (the simulated device, the sidecar). `checkIds` also refuses ids that are not
 * non-negative 32-bit integers (a runtime that sends them on as int32).
 */
export function groupProblem(g: RunGroup, checkIds = false): string | undefined {
  if (g.ids.length === 0) return "a group needs at least one sequence";
  if (g.typeIds !== undefined && g.typeIds.length !== g.ids.length) return `a group of ${g.ids.length} sequences has type ids for ${g.typeIds.length}`;
  for (const [i, seq] of g.ids.entries()) {
    if (seq.length === 0) return `sequence ${i} is empty (it needs at least its special tokens)`;
    const types = g.typeIds?.[i];
    if (types !== undefined && types.length !== seq.length) return `sequence ${i} has ${seq.length} ids but ${types.length} type ids`;
    if (!checkIds) continue;
    for (let s = 0; s < seq.length; s++) {
      const id = seq[s]!;
      if (!(Number.isInteger(id) && id >= 0 && id < 2 ** 31)) return `sequence ${i} has an invalid id at ${s}: ${id}`;
    }
  }
  return undefined;
}
