/**
 * A seeded fault schedule (issue #49): from a seed, a run's length and the lab's hosts, which fault
 * hits whom, when and for how long. Pure: the same inputs give the same schedule on every machine,
 * and a schedule written to JSON reads back exactly, so a failing seed is rerun as it ran.
 *
 * Faults overlap (at most two at a time) as well as come one at a time, within limits that keep
 * the cluster able to serve: one broker at a time (a 3-voter quorum survives one), at most all but
 * one gateway and all but one worker, one fault per host, and a cool-down on a host after its
 * fault (a broker takes ~20 s to start on its own data on this machine).
 */
import { FAULT_KIND_NAMES, FAULT_KINDS, type FaultKind, isFaultKind, RESOLVED_TARGETS, type Role, roleOf } from "./fault-kinds.ts";
import { mulberry32 } from "@shoal/models";

/** One fault of a schedule. Times are ms from the start of the load. */
export interface Fault {
  /** 1, 2, ... in start order. */
  readonly id: number;
  readonly kind: FaultKind;
  /**
   * A host label (`w2`, `kafka1`), or `controller` (the active controller) or `coordinator` (the
   * share group's coordinator), both brokers found when injected.
   */
  readonly target: string;
  readonly atMs: number;
  readonly durationMs: number;
}

/** A whole run's faults, with what made them. */
export interface Schedule {
  readonly version: 1;
  readonly seed: number;
  /** Length of the load, ms. */
  readonly durationMs: number;
  /** The lab's host labels the targets were drawn from. */
  readonly hosts: readonly string[];
  readonly faults: readonly Fault[];
}

/** Knobs of the generator; the defaults suit a run of a few minutes. */
export interface ScheduleOptions {
  /** Mean gap between fault starts (exponential), ms. */
  readonly meanGapMs?: number;
  readonly minFaultMs?: number;
  readonly maxFaultMs?: number;
  /** At most this many faults at once. */
  readonly maxConcurrent?: number;
  /** No fault in the first `quietStartMs` (the baseline) nor the last `quietEndMs` (the recovery). */
  readonly quietStartMs?: number;
  readonly quietEndMs?: number;
}

const DEFAULTS: Required<ScheduleOptions> = {
  meanGapMs: 14_000,
  minFaultMs: 4_000,
  maxFaultMs: 18_000,
  maxConcurrent: 2,
  quietStartMs: 20_000,
  quietEndMs: 30_000,
};

/** Ms a host rests after its fault ends before it can be hit again, by role. */
const COOL_DOWN_MS: Readonly<Record<Role, number>> = { broker: 25_000, gateway: 8_000, worker: 8_000 };

/** How many hosts of `role` may be faulted at once, out of `n`. */
function roleLimit(role: Role, n: number): number {
  return role === "broker" ? Math.floor((n - 1) / 2) : n - 1;
}

/** The role of a target: the controller and the coordinator are brokers. */
function targetRole(target: string): Role | undefined {
  return RESOLVED_TARGETS.includes(target) ? "broker" : roleOf(target);
}

/** The role a fault occupies. */
function faultRole(f: Pick<Fault, "target">): Role | undefined {
  return targetRole(f.target);
}

/**
 * Draws a schedule. Deterministic in (seed, durationMs, kinds, hosts, options).
 * @param kinds the fault kinds to draw from (each is drawn with equal odds)
 * @param hosts the lab's host labels (`kafka1..3`, `gw1..2`, `w1..3`)
 */
export function makeSchedule(seed: number, durationMs: number, kinds: readonly FaultKind[], hosts: readonly string[], options: ScheduleOptions = {}): Schedule {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed: expected an integer, got ${seed}`);
  if (!(durationMs > 0)) throw new RangeError(`durationMs: expected > 0, got ${durationMs}`);
  if (kinds.length === 0) throw new RangeError("kinds: expected at least one fault kind");
  const o = { ...DEFAULTS, ...options };
  const rand = mulberry32(seed);
  const roles = new Map<Role, string[]>();
  for (const h of hosts) {
    const r = roleOf(h);
    if (r !== undefined) roles.set(r, [...(roles.get(r) ?? []), h]);
  }
  const faults: Fault[] = [];
  const lastEnd = durationMs - o.quietEndMs;
  const activeAt = (t0: number, t1: number): Fault[] => faults.filter((f) => f.atMs < t1 && f.atMs + f.durationMs > t0);
  const restingUntil = (host: string, role: Role): number =>
    Math.max(
      0,
      ...faults.filter((f) => f.target === host || (role === "broker" && faultRole(f) === "broker")).map((f) => f.atMs + f.durationMs + COOL_DOWN_MS[role]),
    );

  let t = o.quietStartMs;
  for (;;) {
    t += Math.max(2_000, -Math.log(1 - rand()) * o.meanGapMs);
    const dur = Math.round(o.minFaultMs + rand() * (o.maxFaultMs - o.minFaultMs));
    const kind = kinds[Math.floor(rand() * kinds.length)]!;
    const pick = rand();
    const at = Math.round(t);
    if (at + o.minFaultMs > lastEnd) break;
    const d = Math.min(dur, lastEnd - at);
    const overlapping = activeAt(at, at + d);
    if (overlapping.length >= o.maxConcurrent) continue;
    const spec = FAULT_KINDS[kind].target;
    const candidates = (RESOLVED_TARGETS.includes(spec) ? [spec] : spec === "any" ? [...hosts] : [...(roles.get(spec as Role) ?? [])]).filter((h) => {
      const role = targetRole(h);
      if (role === undefined) return false;
      if (overlapping.some((f) => f.target === h)) return false;
      const sameRole = overlapping.filter((f) => faultRole(f) === role).length;
      if (sameRole + 1 > roleLimit(role, roles.get(role)?.length ?? 0)) return false;
      return at >= restingUntil(h, role);
    });
    if (candidates.length === 0) continue;
    const target = candidates[Math.floor(pick * candidates.length)]!;
    faults.push({ id: faults.length + 1, kind, target, atMs: at, durationMs: d });
  }
  return { version: 1, seed, durationMs, hosts: [...hosts], faults };
}

/** The schedule as printed at the start of a run: one line per fault. */
export function formatSchedule(s: Schedule): string {
  const sec = (ms: number): string => (ms / 1000).toFixed(1);
  const lines = s.faults.map(
    (f) => `  #${String(f.id).padEnd(3)} +${sec(f.atMs).padStart(6)} s for ${sec(f.durationMs).padStart(5)} s  ${f.kind.padEnd(19)} ${f.target}`,
  );
  return [`schedule: seed ${s.seed}, ${sec(s.durationMs)} s of load, ${s.faults.length} faults on ${s.hosts.join(",")}`, ...lines].join("\n");
}

/** The schedule as JSON (for `--schedule file.json`). */
export function scheduleToJson(s: Schedule): string {
  return `${JSON.stringify(s, null, 2)}\n`;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isMs = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;

/**
 * Reads a schedule back from JSON, checking every field.
 * @param source where the text came from, for the messages
 * @throws Error listing every problem at once
 */
export function parseSchedule(text: string, source: string): Schedule {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const problems: string[] = [];
  if (!isObj(raw)) throw new Error(`${source}: expected a JSON object with version, seed, durationMs, hosts and faults`);
  if (raw["version"] !== 1) problems.push(`version: expected 1, got ${JSON.stringify(raw["version"])}`);
  if (!Number.isSafeInteger(raw["seed"])) problems.push(`seed: expected an integer, got ${JSON.stringify(raw["seed"])}`);
  if (!isMs(raw["durationMs"]) || raw["durationMs"] === 0) problems.push(`durationMs: expected ms > 0, got ${JSON.stringify(raw["durationMs"])}`);
  const hosts = raw["hosts"];
  if (!Array.isArray(hosts) || !hosts.every((h) => typeof h === "string" && roleOf(h) !== undefined)) {
    problems.push(`hosts: expected labels like kafka1, gw1, w1, got ${JSON.stringify(hosts)}`);
  }
  const faults = raw["faults"];
  if (!Array.isArray(faults)) problems.push("faults: expected an array");
  const out: Fault[] = [];
  for (const [i, f] of (Array.isArray(faults) ? faults : []).entries()) {
    const at = `faults[${i}]`;
    if (!isObj(f)) {
      problems.push(`${at}: expected an object`);
      continue;
    }
    const kind = f["kind"];
    if (typeof kind !== "string" || !isFaultKind(kind))
      problems.push(`${at}.kind: unknown fault kind ${JSON.stringify(kind)} (known: ${FAULT_KIND_NAMES.join(", ")})`);
    const target = f["target"];
    if (typeof target !== "string" || (!RESOLVED_TARGETS.includes(target) && !(Array.isArray(hosts) && hosts.includes(target)))) {
      problems.push(`${at}.target: expected one of the hosts, 'controller' or 'coordinator', got ${JSON.stringify(target)}`);
    }
    if (!isMs(f["atMs"])) problems.push(`${at}.atMs: expected ms >= 0, got ${JSON.stringify(f["atMs"])}`);
    if (!isMs(f["durationMs"]) || f["durationMs"] === 0) problems.push(`${at}.durationMs: expected ms > 0, got ${JSON.stringify(f["durationMs"])}`);
    if (isMs(f["atMs"]) && isMs(f["durationMs"]) && isMs(raw["durationMs"]) && f["atMs"] + f["durationMs"] > raw["durationMs"]) {
      problems.push(`${at}: ends after the run (${f["atMs"]} + ${f["durationMs"]} > ${raw["durationMs"]} ms)`);
    }
    out.push({ id: i + 1, kind: kind as FaultKind, target: String(target), atMs: Number(f["atMs"]), durationMs: Number(f["durationMs"]) });
  }
  if (problems.length > 0) throw new Error(`${source}: not a valid schedule:\n  ${problems.join("\n  ")}`);
  out.sort((a, b) => a.atMs - b.atMs);
  return {
    version: 1,
    seed: raw["seed"] as number,
    durationMs: raw["durationMs"] as number,
    hosts: hosts as string[],
    faults: out.map((f, i) => ({ ...f, id: i + 1 })),
  };
}
