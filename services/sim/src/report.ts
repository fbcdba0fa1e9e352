/** Prints a sweep as the benchmark's tables. */
import { fmtMs, type SweepResult } from "./sweep.ts";

/** Goodput at each knee and the ratio shared queue ÷ each arm, then each arm at the shared queue's middle knee. */
export function printSweep(sweep: SweepResult, print: (line: string) => void): void {
  const shared = sweep.policies[0]!;
  const multiples = shared.knees.map((k) => `${k.sloMultiple}×`);
  print(`lone median request ${fmtMs(sweep.loneMedianMs).trim()}; SLO ${shared.knees.map((k) => `${k.sloMultiple}× = ${fmtMs(k.sloMs).trim()}`).join(", ")}`);
  print(
    `${"policy".padEnd(36)}${multiples.map((m) => `knee ρ ${m}`.padStart(11)).join("")}${multiples.map((m) => `jobs/s ${m}`.padStart(12)).join("")}` +
      `${multiples.map((m) => `shared÷ ${m}`.padStart(12)).join("")}`,
  );
  for (const p of sweep.policies) {
    const ratios = p.knees.map((k, i) => {
      const s = shared.knees[i]!.goodputJobsPerSecond;
      return k.goodputJobsPerSecond > 0 ? (s / k.goodputJobsPerSecond).toFixed(2) : s > 0 ? "∞" : "—";
    });
    print(
      `${p.policy.padEnd(36)}${p.knees.map((k) => k.load.toFixed(2).padStart(11)).join("")}` +
        `${p.knees.map((k) => k.goodputJobsPerSecond.toFixed(0).padStart(12)).join("")}${ratios.map((r) => r.padStart(12)).join("")}`,
    );
  }
  // Everyone at the load the shared queue sustains within the middle SLO: where the time goes.
  const mid = shared.knees[Math.floor(shared.knees.length / 2)]!;
  const at = mid.load;
  if (at <= 0) return;
  print(`at ρ = ${at.toFixed(2)} (shared queue's ${mid.sloMultiple}× knee):`);
  print(
    `${"policy".padEnd(36)}${"answered".padStart(10)}${"call p50".padStart(10)}${"call p99".padStart(10)}${"req p99".padStart(10)}${"useful tok".padStart(11)}${"waited idle".padStart(12)}  busy per device`,
  );
  for (const p of sweep.policies) {
    const r = p.runs.get(at);
    if (r === undefined) continue;
    print(
      `${p.policy.padEnd(36)}${`${(r.answeredFraction * 100).toFixed(1)}%`.padStart(10)}${fmtMs(r.latency.all!.p50Ms).padStart(10)}${fmtMs(r.latency.all!.p99Ms).padStart(10)}` +
        `${fmtMs(r.latency.request!.p99Ms).padStart(10)}${r.usefulTokenFraction.toFixed(3).padStart(11)}${`${((r.jobsWaitedWhileIdle / r.jobs) * 100).toFixed(1)}%`.padStart(12)}  ` +
        r.busyFraction.map((b) => b.toFixed(2)).join(" "),
    );
  }
}
