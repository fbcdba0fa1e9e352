// Lanes live in @shoal/common (lanes.ts); this re-export only serves openai-telemetry.ts until
// that file imports them from there.
export { laneName, servedLane } from "@shoal/common";
