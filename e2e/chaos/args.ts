/**
 * The chaos runner's command line (`npm run chaos -- --seed N --minutes M ...`), parsed and checked
 * before anything starts: every problem is reported at once.
 */
import { FAULT_KIND_NAMES, type FaultKind, parseFaultKinds } from "./fault-kinds.ts";

/** The runner's settings. */
export interface ChaosArgs {
  readonly seed: number;
  /** Length of the load, minutes (ignored with `schedulePath`, whose own length rules). */
  readonly minutes: number;
  readonly faults: readonly FaultKind[];
  /** A schedule written by an earlier run, to rerun it exactly. */
  readonly schedulePath: string | undefined;
  /** Calls per second of the open-loop load. */
  readonly ratePerS: number;
  /** Each call's budget, ms. */
  readonly deadlineMs: number;
  /** How long the lab (brokers, gateways, workers) may take to come up, s. */
  readonly startTimeoutS: number;
}

/** `npm run chaos -- --help`. */
export const USAGE = `usage: npm run chaos -- [--seed N] [--minutes M] [--faults k1,k2|all] [--schedule file.json]
                      [--rate calls/s] [--deadline-ms ms] [--start-timeout-s s]
  --seed N            seed of the fault schedule (default 1)
  --minutes M         length of the load, 0.5-60 (default 3)
  --faults LIST       fault kinds to draw from (default all: ${FAULT_KIND_NAMES.join(", ")})
  --schedule FILE     run the schedule in FILE (written by an earlier run) instead of drawing one
  --rate R            calls per second, open loop (default 8)
  --deadline-ms MS    each call's budget (default 10000)
  --start-timeout-s S the lab must be up within S seconds (default 180)`;

const DEFAULTS = { seed: 1, minutes: 3, ratePerS: 8, deadlineMs: 10_000, startTimeoutS: 180 };

/**
 * Parses argv (without node and the script).
 * @returns the settings, or "help" for --help
 * @throws Error listing every problem
 */
export function parseChaosArgs(argv: readonly string[]): ChaosArgs | "help" {
  const problems: string[] = [];
  const values = new Map<string, string>();
  const known = ["--seed", "--minutes", "--faults", "--schedule", "--rate", "--deadline-ms", "--start-timeout-s"];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--help" || a === "-h") return "help";
    const [name, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    if (!known.includes(name)) {
      problems.push(`unknown option '${a}'`);
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined || value.startsWith("--")) {
      problems.push(`${name}: expected a value`);
      if (value !== undefined) i--;
      continue;
    }
    values.set(name, value);
  }
  const num = (name: string, fallback: number, ok: (n: number) => boolean, what: string): number => {
    const v = values.get(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (v.trim() === "" || !Number.isFinite(n) || !ok(n)) {
      problems.push(`${name}: expected ${what}, got '${v}'`);
      return fallback;
    }
    return n;
  };
  const seed = num("--seed", DEFAULTS.seed, (n) => Number.isSafeInteger(n) && n >= 0, "a whole number >= 0");
  const minutes = num("--minutes", DEFAULTS.minutes, (n) => n >= 0.5 && n <= 60, "minutes from 0.5 to 60");
  const ratePerS = num("--rate", DEFAULTS.ratePerS, (n) => n > 0 && n <= 200, "calls per second, > 0 and <= 200");
  const deadlineMs = num("--deadline-ms", DEFAULTS.deadlineMs, (n) => Number.isInteger(n) && n >= 500, "whole ms >= 500");
  const startTimeoutS = num("--start-timeout-s", DEFAULTS.startTimeoutS, (n) => n > 0, "seconds > 0");
  let faults: FaultKind[] = [...FAULT_KIND_NAMES];
  try {
    faults = parseFaultKinds(values.get("--faults") ?? "all");
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
  }
  if (problems.length > 0) throw new Error(`bad arguments:\n  ${problems.join("\n  ")}\n${USAGE}`);
  return { seed, minutes, faults, schedulePath: values.get("--schedule"), ratePerS, deadlineMs, startTimeoutS };
}
