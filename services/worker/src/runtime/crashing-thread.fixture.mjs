// Test fixture: the real inference thread, except that a run whose first id is 666 666 kills
// the thread mid-run (as a native abort or OOM would), and one whose first id is 777 777 throws
// an uncaught error. Used only by inference-threads.test.ts through the pool's `threadEntry`.
import { parentPort } from "node:worker_threads";
import { register } from "tsx/esm/api";

// Registered before the thread's own listener, so it sees each message first.
parentPort.on("message", (msg) => {
  if (msg.type !== "run") return;
  const first = msg.groups[0]?.inputIds[0];
  if (first === 666666n) process.exit(3);
  if (first === 777777n)
    setImmediate(() => {
      throw new Error("injected uncaught error");
    });
});

register();
await import("./inference-thread.ts");
