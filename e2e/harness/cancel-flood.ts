/**
 * The cancel flood of the adversarial suite, run as its own process (as an attacker would be):
 * `node --import tsx e2e/harness/cancel-flood.ts <url> <model> <calls>`. It opens its gRPC
 * connection with one ordinary call, prints `ready`, waits for a line on stdin, then sends
 * `calls` Embeds in waves of 10, aborting each 1 ms after sending, and prints a JSON line:
 * the count of each code the aborted calls ended with, and the flood's duration.
 *
 * In the test's own process, the attacker's client work shared the event loop with the polite
 * caller's and delayed its answers by ~100 ms; here it does not.
 */
import { createInterface } from "node:readline";
import { Code } from "@connectrpc/connect";
import { clientsFor, codeOf } from "./clients.ts";

const [url, model, calls] = process.argv.slice(2);
if (url === undefined || model === undefined) throw new Error("usage: cancel-flood.ts <url> <model> [calls]");
const total = Number(calls ?? 300);
const { inference } = clientsFor(url, "grpc");
await inference.embed({ model, inputs: ["attacker warm-up"] });
process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => lines.once("line", () => resolve()));
lines.close();

const started = performance.now();
const codes: Record<string, number> = {};
const messages = new Set<string>();
for (let wave = 0; wave < total; wave += 10) {
  const out = await Promise.all(
    Array.from({ length: Math.min(10, total - wave) }, async (_, i) => {
      const ac = new AbortController();
      const call = codeOf(inference.embed({ model, inputs: [`cancel me ${wave + i}`] }, { signal: ac.signal }));
      setTimeout(() => ac.abort(), 1);
      return call;
    }),
  );
  for (const o of out) {
    codes[Code[o.code]] = (codes[Code[o.code]] ?? 0) + 1;
    if (o.code !== Code.Canceled) messages.add(`${Code[o.code]}: ${o.message}`);
  }
}
process.stdout.write(`${JSON.stringify({ codes, odd: [...messages].slice(0, 5), ms: performance.now() - started })}\n`);
