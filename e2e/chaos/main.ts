/**
 * `npm run chaos -- --seed N --minutes M`: the seeded fault campaign of issue #49. Checks its input
 * and the machine first (nothing starts on bad input), prints the schedule, starts the lab, runs
 * the open-loop load while the schedule's faults play, checks the history, prints the summary,
 * writes the run's folder (schedule.json to rerun it, history.jsonl, every process's log) and tears
 * the lab down — also on SIGINT / SIGTERM. Exit 0: no invariant broken; 1: some were; 2: bad input
 * or a lab that did not come up.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createShoalClient } from "@shoal/client";
import { netnsProblem } from "../harness/netns.ts";
import { saveLogs } from "../harness/service-process.ts";
import { parseChaosArgs, USAGE } from "./args.ts";
import { checkHistory, DEFAULT_CHECK_OPTIONS, passed } from "./checker.ts";
import { FAULT_KINDS, NEEDS_MEMORY_CGROUP, NEEDS_TC } from "./fault-kinds.ts";
import { memoryCgroupProblem } from "./memory-cgroup.ts";
import { type HistoryRecord, historyToJsonl, type LogRecord } from "./history.ts";
import { ALL_LAB_HOSTS, type ChaosLab, createLabHandle, startChaosLab } from "./lab.ts";
import { computeReferences, type LoadTarget, runLoad } from "./load.ts";
import { baselineOf, byKind, recoveries } from "./recovery.ts";
import { invariantsTable, recoveryTable } from "./report.ts";
import { type FaultPlayer, playFaults } from "./run-faults.ts";
import { formatSchedule, makeSchedule, parseSchedule, type Schedule, scheduleToJson } from "./schedule.ts";

const say = (line: string): void => void process.stderr.write(`chaos: ${line}\n`);

/** Fails with exit 2 and a message, before anything started. */
function refuse(message: string): never {
  process.stderr.write(`chaos: ${message}\n`);
  process.exit(2);
}

/** The schedule to run: read from `--schedule`, else drawn from the seed. Refuses a bad file or unsuitable machine. */
async function plan(argv: readonly string[]): Promise<{ schedule: Schedule; ratePerS: number; deadlineMs: number; startTimeoutS: number }> {
  let args: ReturnType<typeof parseChaosArgs>;
  try {
    args = parseChaosArgs(argv);
  } catch (err) {
    refuse(err instanceof Error ? err.message : String(err));
  }
  if (args === "help") {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  let schedule: Schedule;
  if (args.schedulePath !== undefined) {
    const text = await readFile(args.schedulePath, "utf8").catch((err: unknown) => refuse(`--schedule: cannot read ${args.schedulePath}: ${String(err)}`));
    try {
      schedule = parseSchedule(text, args.schedulePath);
    } catch (err) {
      refuse(err instanceof Error ? err.message : String(err));
    }
    const foreign = schedule.hosts.filter((h) => !ALL_LAB_HOSTS.includes(h));
    if (foreign.length > 0) refuse(`${args.schedulePath}: hosts ${foreign.join(", ")} are not in the lab (${ALL_LAB_HOSTS.join(", ")})`);
  } else {
    schedule = makeSchedule(args.seed, Math.round(args.minutes * 60_000), args.faults, ALL_LAB_HOSTS);
  }
  const problem = await netnsProblem();
  if (problem !== undefined) refuse(`cannot build the lab here: ${problem}`);
  if (schedule.faults.some((f) => NEEDS_TC.has(f.kind))) {
    const tc = await promisify(execFile)("tc", ["-V"]).then(
      () => undefined,
      (err: unknown) => String(err),
    );
    if (tc !== undefined) refuse(`the schedule has netem faults but 'tc' is not usable (${tc}); install iproute2, or leave netem out with --faults`);
  }
  if (schedule.faults.some((f) => NEEDS_MEMORY_CGROUP.has(f.kind))) {
    const cg = await memoryCgroupProblem();
    if (cg !== undefined) refuse(`the schedule has worker-memory-limit faults but ${cg}; leave it out with --faults`);
  }
  return { schedule, ratePerS: args.ratePerS, deadlineMs: args.deadlineMs, startTimeoutS: args.startTimeoutS };
}

/** Warn-and-worse lines of every process, for the history. */
function logRecords(lab: ChaosLab): LogRecord[] {
  return lab.processes.flatMap((p) =>
    p.logs
      .filter((l) => ["warn", "error", "fatal", "stderr"].includes(String(l.level)))
      .map((l) => ({
        type: "log" as const,
        process: p.name,
        timeMs: typeof l["time"] === "number" ? l["time"] : Date.parse(String(l["time"])) || 0,
        level: String(l.level),
        msg: String(l.msg ?? ""),
        ...(l["jobId"] === undefined ? {} : { jobId: String(l["jobId"]) }),
      })),
  );
}

const { schedule, ratePerS, deadlineMs, startTimeoutS } = await plan(process.argv.slice(2));
const runDir = join(tmpdir(), `shoal-chaos-seed${schedule.seed}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
await mkdir(runDir, { recursive: true });
await writeFile(join(runDir, "schedule.json"), scheduleToJson(schedule));
process.stdout.write(`${formatSchedule(schedule)}\n`);
say(`fault kinds: ${[...new Set(schedule.faults.map((f) => f.kind))].map((k) => `${k} (${FAULT_KINDS[k].does})`).join("; ")}`);
say(`schedule written to ${join(runDir, "schedule.json")}: rerun it with npm run chaos -- --schedule ${join(runDir, "schedule.json")}`);

const handle = createLabHandle();
let player: FaultPlayer | undefined;
let interrupted = false;
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    say(`${sig}: stopping the faults and tearing the lab down`);
    player?.stop();
    void handle.teardown().finally(() => process.exit(sig === "SIGINT" ? 130 : 143));
  });
}

const t0 = performance.now();
let startTimer: NodeJS.Timeout | undefined;
const lab = await Promise.race([
  startChaosLab(handle, say),
  new Promise<never>((_, reject) => {
    startTimer = setTimeout(() => reject(new Error(`the lab did not come up within ${startTimeoutS} s (waiting on: ${handle.step})`)), startTimeoutS * 1000);
  }),
]).catch(async (err: unknown) => {
  say(`${err instanceof Error ? err.message : String(err)}`);
  await handle.teardown();
  process.exit(2);
});
clearTimeout(startTimer);
say(`lab up in ${((performance.now() - t0) / 1000).toFixed(0)} s; computing the reference answers, one unit per call`);

const targets: LoadTarget[] = [...lab.gateways.values()].map((g) => ({
  label: g.host.label,
  url: g.url,
  client: createShoalClient({ baseUrl: g.url, httpVersion: "2", retry: { maxAttempts: 1_000, initialBackoffMs: 100, maxBackoffMs: 1_000 } }),
}));
const references = await computeReferences(targets[0]!.client);
for (const t of targets) await t.client.embed("shoal-tiny-embed", ["warm-up"], { timeoutMs: 30_000 });
say(`${references.length} references; load: ${ratePerS} calls/s for ${(schedule.durationMs / 1000).toFixed(0)} s, deadline ${deadlineMs} ms`);

const startMs = Date.now();
player = playFaults(lab, schedule, startMs, say);
const calls = await runLoad({ targets: () => targets, seed: schedule.seed, ratePerS, durationMs: schedule.durationMs, deadlineMs, settleMs: 5_000, startMs });
player.stop();
const faults = await player.finish();
if (interrupted) await new Promise(() => undefined);

const history: HistoryRecord[] = [...references, ...faults, ...calls, ...logRecords(lab)];
const result = checkHistory(history, DEFAULT_CHECK_OPTIONS);
const firstFault = Math.min(startMs + schedule.durationMs, ...faults.map((f) => f.startMs));
const base = baselineOf(calls, startMs, firstFault);
const perFault = recoveries(calls, faults, base);
const ok = passed(result);

process.stdout.write(`\n## chaos seed ${schedule.seed}: ${calls.length} calls, ${faults.length} faults, ${ok ? "PASS" : "FAIL"}\n\n`);
process.stdout.write(`${invariantsTable(result, DEFAULT_CHECK_OPTIONS.graceMs)}\n\n${recoveryTable(byKind(perFault), base)}\n\nfaults:\n`);
for (const r of perFault) {
  const f = r.fault;
  const rel = (ms: number): string => `+${((ms - startMs) / 1000).toFixed(1)}`;
  process.stdout.write(
    `  #${f.id} ${f.kind} ${f.target} ${rel(f.startMs)}..${rel(f.endMs)} s: recovered ${r.recoveredMs === null ? "never" : `${(r.recoveredMs / 1000).toFixed(1)} s after the heal`}, gap ${(r.longestGapMs / 1000).toFixed(1)} s, ${r.failed}/${r.sent} failed${f.note ? ` (${f.note})` : ""}\n`,
  );
}
for (const v of result.violations.slice(0, 30))
  process.stdout.write(`  VIOLATION ${v.invariant} call ${v.callId}: ${v.detail}; faults around it: ${v.faults.join(",") || "none"}\n`);

await writeFile(join(runDir, "history.jsonl"), historyToJsonl(history));
await saveLogs(
  join(runDir, "logs"),
  lab.processes.map((p, i) => ({ name: `${p.name}-${i}`, logs: p.logs })),
);
await writeFile(join(runDir, "kafka-warnings.txt"), await lab.kafka.warnings(200));
say(`history, logs and schedule in ${runDir}${ok ? "" : " (the brokers' data is kept there too)"}`);
await handle.teardown(ok ? undefined : runDir);
process.exit(ok ? 0 : 1);
