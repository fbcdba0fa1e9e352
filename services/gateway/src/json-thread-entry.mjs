// Entry module of the gateway's JSON thread, as inference-thread-entry.mjs is the worker's: on
// Node a worker does not get the `--import tsx` hooks before loading its entry, so it registers
// tsx, then imports the TypeScript body. The bundles build this file from json-thread.ts.
import { register } from "tsx/esm/api";

register();
await import("./json-thread.ts");
