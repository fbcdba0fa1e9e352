/**
 * Prints the infra/pretrained Python environment's interpreter, building the environment first if
 * it is missing (progress on stderr). Used by infra/gpu/pack.sh.
 */
import { ensurePretrainedEnv } from "../models/src/pretrained.ts";

console.log((await ensurePretrainedEnv()).python);
