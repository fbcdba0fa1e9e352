/**
 * Plays a schedule's faults against the lab, on the clock of the load: fault f starts at
 * `startMs + f.atMs` and is healed `f.durationMs` later. A fault whose host is still recovering
 * from an earlier one (a broker still starting) is skipped and says so; a fault that cannot be
 * injected is recorded with why. Every fault is healed before `finish()` resolves.
 */
import type { FaultRecord } from "./history.ts";
import { RESOLVED_TARGETS } from "./fault-kinds.ts";
import { INJECTORS, resolveTarget } from "./inject.ts";
import type { ChaosLab } from "./lab.ts";
import type { Schedule } from "./schedule.ts";

/** The faults being played. */
export interface FaultPlayer {
  /** Waits for every fault to start and heal (none starts after `stop()`); resolves with their records. */
  finish(): Promise<FaultRecord[]>;
  /** No further fault starts; those in progress are healed now. */
  stop(): void;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

/** Starts playing `schedule` from `startMs` (Date.now() ms); `log` gets one line per start and heal. */
export function playFaults(lab: ChaosLab, schedule: Schedule, startMs: number, log: (line: string) => void): FaultPlayer {
  const stopper = new AbortController();
  const busy = new Set<string>();
  const records: FaultRecord[] = [];
  const at = (ms: number): string => `+${((ms - startMs) / 1000).toFixed(1)} s`;
  const one = async (f: Schedule["faults"][number]): Promise<void> => {
    await sleep(startMs + f.atMs - Date.now(), stopper.signal);
    if (stopper.signal.aborted) return;
    const t0 = Date.now();
    let target = f.target;
    try {
      target = await resolveTarget(lab, f.target);
      if (busy.has(target)) throw new Error(`${target} is still recovering from an earlier fault`);
      busy.add(target);
    } catch (err) {
      const note = `skipped: ${err instanceof Error ? err.message : String(err)}`;
      records.push({ type: "fault", id: f.id, kind: f.kind, target, startMs: t0, endMs: t0, note });
      log(`${at(t0)} fault #${f.id} ${f.kind} ${target}: ${note}`);
      return;
    }
    let heal: (() => Promise<string>) | undefined;
    try {
      heal = (await INJECTORS[f.kind](lab, target)).heal;
      log(
        `${at(t0)} fault #${f.id} ${f.kind} ${target}${RESOLVED_TARGETS.includes(f.target) ? ` (the ${f.target})` : ""} for ${(f.durationMs / 1000).toFixed(1)} s`,
      );
    } catch (err) {
      const note = `not injected: ${err instanceof Error ? err.message : String(err)}`;
      records.push({ type: "fault", id: f.id, kind: f.kind, target, startMs: t0, endMs: Date.now(), note });
      log(`${at(t0)} fault #${f.id} ${f.kind} ${target}: ${note}`);
      busy.delete(target);
      return;
    }
    await sleep(t0 + f.durationMs - Date.now(), stopper.signal);
    const healAt = Date.now();
    let note: string;
    try {
      note = await heal();
    } catch (err) {
      note = `heal failed: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`;
    }
    const endMs = Date.now();
    busy.delete(target);
    records.push({ type: "fault", id: f.id, kind: f.kind, target, startMs: t0, endMs, note: `heal began ${at(healAt)}; ${note}` });
    log(`${at(endMs)} fault #${f.id} ${f.kind} ${target} healed (${note})`);
  };
  const all = Promise.all(schedule.faults.map(one));
  return {
    async finish() {
      await all;
      return records.sort((a, b) => a.id - b.id);
    },
    stop() {
      stopper.abort();
    },
  };
}
