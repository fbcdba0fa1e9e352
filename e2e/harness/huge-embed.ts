/**
 * The huge-Embed attack of the adversarial suite (issue #52), run as its own process (building and
 * sending 7.8 MiB bodies in the test's process would delay the polite caller's own client):
 * `node --import tsx e2e/harness/huge-embed.ts <url> <model> [callers] [texts] [chars]`.
 * It prints `ready`, waits for a line on stdin (`go`), then `callers` callers each send Connect
 * JSON Embeds of `texts` texts of `chars` characters without spaces (legal: under the default
 * request limit), one after the other, until a second line (`stop`); then it prints a JSON line:
 * the calls answered and refused by code, the texts embedded per second, and the calls' latencies.
 */
import { createInterface } from "node:readline";

const [url, model, callersArg, textsArg, charsArg] = process.argv.slice(2);
if (url === undefined || model === undefined) throw new Error("usage: huge-embed.ts <url> <model> [callers] [texts] [chars]");
const callers = Number(callersArg ?? 4);
const texts = Number(textsArg ?? 256);
const chars = Number(charsArg ?? 32_000);

/** One caller's body: letters and digits, no spaces, so each text is one 32,000-character "word". */
function body(caller: number): Buffer {
  const inputs = Array.from({ length: texts }, (_, i) => {
    const head = `c${caller}t${i}x`;
    return head + "abcdefghijklmnopqrstuvwxyz0123456789".repeat(Math.ceil(chars / 36)).slice(0, chars - head.length);
  });
  return Buffer.from(JSON.stringify({ model, inputs }));
}
const bodies = Array.from({ length: callers }, (_, c) => body(c));

const lines = createInterface({ input: process.stdin });
const next = (): Promise<string> => new Promise((resolve) => lines.once("line", resolve));
process.stdout.write(`ready ${bodies[0]!.length}\n`);
await next();
let stopping = false;
void next().then(() => (stopping = true));

const codes: Record<string, number> = {};
const latencies: number[] = [];
const started = performance.now();
let embedded = 0;
await Promise.all(
  bodies.map(async (b) => {
    while (!stopping) {
      const t = performance.now();
      const res = await fetch(`${url}/shoal.v1.InferenceService/Embed`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-timeout-ms": "60000" },
        body: b,
      });
      const answer = (await res.json()) as { code?: string; embeddings?: unknown[]; message?: string };
      latencies.push(performance.now() - t);
      const code = res.ok ? "ok" : (answer.code ?? `http_${res.status}`);
      codes[code] = (codes[code] ?? 0) + 1;
      if (res.ok) embedded += answer.embeddings?.length ?? 0;
      // A refusal carries its retry hint (ResourceExhausted): honour it, as a well-behaved client would.
      else await new Promise((r) => setTimeout(r, Number(res.headers.get("retry-after-ms") ?? 100)));
    }
  }),
);
lines.close();
const seconds = (performance.now() - started) / 1000;
latencies.sort((a, b) => a - b);
process.stdout.write(
  `${JSON.stringify({ codes, seconds, textsPerSecond: embedded / seconds, callsPerSecond: (codes["ok"] ?? 0) / seconds, latenciesMs: latencies.map(Math.round) })}\n`,
);
