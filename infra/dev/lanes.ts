/**
 * The e2e phase of `npm test` in lanes: each lane runs its share of the files one at a time against
 * a scratch broker of its own, beside the other lanes. A broker per lane, not one shared: workers
 * publish their status on the broker's cluster-wide topic, so tests that count the workers a
 * gateway sees would count the other lane's too.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { FileTimes } from "./file-times.ts";
import { REPO_ROOT } from "./shell.ts";

/** What a file with no recorded time is taken to cost when the lanes are balanced. */
export const UNKNOWN_FILE_MS = 30_000;
/** What every file costs besides its recorded tests: its own process, tsx and the imports (about 3 s on two cores). */
export const FILE_START_MS = 3_000;

/**
 * Splits `files` into `n` lanes of about equal recorded time: each file, longest first, goes to
 * the lane with the least so far (ties to the lower lane). Within a lane, files keep that order.
 * Each file costs its recorded time (UNKNOWN_FILE_MS with none) plus FILE_START_MS.
 */
export function balanceLanes(files: readonly string[], times: FileTimes, n: number): string[][] {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`lanes must be a positive integer, not ${n}`);
  const cost = (f: string): number => (times.get(f) ?? UNKNOWN_FILE_MS) + FILE_START_MS;
  const ordered = [...files].sort((a, b) => cost(b) - cost(a) || a.localeCompare(b));
  const lanes = Array.from({ length: n }, () => ({ files: [] as string[], ms: 0 }));
  for (const f of ordered) {
    const lightest = lanes.reduce((best, lane) => (lane.ms < best.ms ? lane : best));
    lightest.files.push(f);
    lightest.ms += cost(f);
  }
  return lanes.map((l) => l.files);
}

/**
 * Runs a command with every line of its output prefixed by `label` (lanes print side by side, and
 * each line says whose it is); resolves with its exit code.
 */
export function runLabelled(label: string, cmd: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    const pipes = [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const;
    const closed = pipes.map(
      ([from, to]) =>
        new Promise<void>((done) => {
          const lines = createInterface({ input: from, crlfDelay: Number.POSITIVE_INFINITY });
          lines.on("line", (line) => to.write(`${label} ${line}\n`));
          lines.once("close", done);
        }),
    );
    child.once("error", fail);
    child.once("close", (code, signal) => {
      void Promise.all(closed).then(() => ok(code ?? (signal ? 128 : 1)));
    });
  });
}
