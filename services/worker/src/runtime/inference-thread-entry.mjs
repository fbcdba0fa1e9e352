// Entry module of inference worker threads. It exists because on Node 20 a worker does not get
// the `--import tsx` hooks it inherits in execArgv before loading its entry, so
// `new Worker(new URL('./inference-thread.ts', import.meta.url))` fails with
// ERR_UNKNOWN_FILE_EXTENSION (nodejs/node#47747, privatenumber/tsx#354). Registering tsx here,
// then importing the TypeScript body, works under `node --import tsx` and `node --test`.
import { register } from "tsx/esm/api";

register();
await import("./inference-thread.ts");
