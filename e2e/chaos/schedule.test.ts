import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FAULT_KIND_NAMES, parseFaultKinds } from "./fault-kinds.ts";
import { formatSchedule, makeSchedule, parseSchedule, scheduleToJson, type Schedule } from "./schedule.ts";

const HOSTS = ["kafka1", "kafka2", "kafka3", "gw1", "gw2", "w1", "w2", "w3"];
const ROLE = (t: string): string => (t === "controller" || t === "coordinator" || t.startsWith("kafka") ? "broker" : t.startsWith("gw") ? "gateway" : "worker");

/** Pairs of faults of `s` whose times overlap. */
function overlaps(s: Schedule): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const a of s.faults)
    for (const b of s.faults) if (a.id < b.id && a.atMs < b.atMs + b.durationMs && b.atMs < a.atMs + a.durationMs) out.push([a.id, b.id]);
  return out;
}

describe("seeded fault schedule", () => {
  test("the same seed gives the same schedule; another seed another one", () => {
    const a = makeSchedule(1, 180_000, FAULT_KIND_NAMES, HOSTS);
    assert.deepEqual(makeSchedule(1, 180_000, FAULT_KIND_NAMES, HOSTS), a);
    assert.notDeepEqual(makeSchedule(2, 180_000, FAULT_KIND_NAMES, HOSTS).faults, a.faults);
    assert.ok(a.faults.length >= 4, `a 3-minute schedule has several faults, got ${a.faults.length}`);
  });

  test("faults stay in the window, come alone and overlapping, and keep the limits", () => {
    let overlapping = 0;
    let alone = 0;
    const seen = new Set<string>();
    for (let seed = 1; seed <= 40; seed++) {
      const s = makeSchedule(seed, 600_000, FAULT_KIND_NAMES, HOSTS);
      const pairs = overlaps(s);
      overlapping += pairs.length;
      alone += s.faults.filter((f) => !pairs.some((p) => p.includes(f.id))).length;
      for (const f of s.faults) {
        seen.add(f.kind);
        assert.ok(f.atMs >= 20_000 && f.atMs + f.durationMs <= 600_000 - 30_000, `seed ${seed} #${f.id} inside the fault window`);
        assert.ok(f.durationMs >= 4_000 && f.durationMs <= 18_000);
        const at = s.faults.filter((g) => g.atMs <= f.atMs && g.atMs + g.durationMs > f.atMs);
        assert.ok(at.length <= 2, `seed ${seed}: at most two faults at once`);
        assert.ok(at.filter((g) => ROLE(g.target) === "broker").length <= 1, `seed ${seed}: one broker at a time`);
        assert.ok(at.filter((g) => ROLE(g.target) === "gateway").length <= 1, `seed ${seed}: a gateway always up`);
        assert.equal(new Set(at.map((g) => g.target)).size, at.length, `seed ${seed}: one fault per host`);
      }
    }
    assert.ok(overlapping > 10 && alone > 10, `overlapping pairs ${overlapping}, faults alone ${alone}`);
    assert.deepEqual([...seen].sort(), [...FAULT_KIND_NAMES].sort(), "every kind is drawn");
  });

  test("only the kinds asked for are drawn", () => {
    const s = makeSchedule(7, 300_000, ["kill-worker", "cut-host"], HOSTS);
    assert.ok(s.faults.length > 0);
    assert.ok(s.faults.every((f) => f.kind === "kill-worker" || f.kind === "cut-host"));
    assert.ok(s.faults.filter((f) => f.kind === "kill-worker").every((f) => ROLE(f.target) === "worker"));
  });

  test("JSON round trip is exact, and the printout names every fault", () => {
    const s = makeSchedule(3, 180_000, FAULT_KIND_NAMES, HOSTS);
    assert.deepEqual(parseSchedule(scheduleToJson(s), "x.json"), s);
    const text = formatSchedule(s);
    assert.match(text, /seed 3, 180\.0 s of load/);
    for (const f of s.faults) assert.ok(text.includes(`${f.kind}`) && text.includes(`#${f.id}`));
  });

  test("a schedule file that does not parse, or names unknown kinds or hosts: every problem at once", () => {
    assert.throws(() => parseSchedule("{ not json", "bad.json"), /bad\.json: not JSON/);
    assert.throws(() => parseSchedule("[]", "arr.json"), /expected a JSON object/);
    const bad = JSON.stringify({
      version: 1,
      seed: 1,
      durationMs: 60_000,
      hosts: ["w1", "gw1"],
      faults: [
        { kind: "melt-cpu", target: "w1", atMs: 1, durationMs: 5 },
        { kind: "kill-worker", target: "w9", atMs: -1, durationMs: 0 },
        { kind: "kill-worker", target: "w1", atMs: 59_000, durationMs: 5_000 },
      ],
    });
    assert.throws(
      () => parseSchedule(bad, "s.json"),
      (err: Error) =>
        /unknown fault kind "melt-cpu"/.test(err.message) &&
        /faults\[1\]\.target/.test(err.message) &&
        /faults\[1\]\.atMs/.test(err.message) &&
        /faults\[1\]\.durationMs/.test(err.message) &&
        /faults\[2\]: ends after the run/.test(err.message),
    );
  });

  test("--faults: unknown names are refused together, with the known list", () => {
    assert.deepEqual(parseFaultKinds("kill-worker, netem,kill-worker"), ["kill-worker", "netem"]);
    assert.deepEqual(parseFaultKinds("all"), FAULT_KIND_NAMES);
    assert.throws(
      () => parseFaultKinds("kill-worker,explode,melt"),
      (err: Error) =>
        /unknown fault kind 'explode'/.test(err.message) && /unknown fault kind 'melt'/.test(err.message) && /known: kill-worker/.test(err.message),
    );
    assert.throws(() => parseFaultKinds(" , "), /got none/);
  });

  test("the model, memory and coordinator kinds: accepted, drawn on their targets, the coordinator as a broker", () => {
    const kinds = parseFaultKinds("model-load-fail,worker-memory-limit,move-coordinator");
    assert.deepEqual(kinds, ["model-load-fail", "worker-memory-limit", "move-coordinator"]);
    for (const k of kinds) assert.ok(FAULT_KIND_NAMES.includes(k), `${k} is in 'all'`);
    const seen = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      // Beside broker faults: a coordinator move must never overlap another broker's fault.
      const s = makeSchedule(seed, 600_000, [...kinds, "kill-broker", "restart-broker"], HOSTS);
      for (const f of s.faults) {
        seen.add(f.kind);
        if (f.kind === "move-coordinator") assert.equal(f.target, "coordinator");
        else if (f.kind === "model-load-fail" || f.kind === "worker-memory-limit") assert.match(f.target, /^w\d$/);
        const at = s.faults.filter((g) => g.atMs <= f.atMs && g.atMs + g.durationMs > f.atMs);
        assert.ok(at.filter((g) => ROLE(g.target) === "broker").length <= 1, `seed ${seed} #${f.id}: one broker fault at a time, the coordinator's included`);
        assert.ok(at.filter((g) => ROLE(g.target) === "worker").length <= 2, `seed ${seed}: a worker always whole`);
        assert.equal(new Set(at.map((g) => g.target)).size, at.length, `seed ${seed}: one fault per host`);
      }
      assert.deepEqual(parseSchedule(scheduleToJson(s), "c.json"), s, "a coordinator target reads back");
    }
    assert.deepEqual([...seen].sort(), [...kinds, "kill-broker", "restart-broker"].sort());
  });
});
