/**
 * The fault kinds of the chaos campaign (issue #49): their names, which role of host each one hits,
 * and what each needs of the machine beyond the lab (checked before anything starts).
 */

/** A host's role in the lab: its label says it (`kafka1`, `gw2`, `w3`). */
export type Role = "broker" | "gateway" | "worker";

/**
 * What a fault hits: a host of a role, any host, the active KRaft controller, or the broker that
 * coordinates the pool's share group (those two resolved when injected).
 */
export type TargetSpec = Role | "any" | "controller" | "coordinator";

/** The targets resolved when a fault starts; each is a broker. */
export const RESOLVED_TARGETS: readonly string[] = ["controller", "coordinator"];

/** One kind of fault: what it does, and whom. */
export interface FaultKindInfo {
  readonly target: TargetSpec;
  /** One line for the printed schedule and docs/chaos.md. */
  readonly does: string;
}

/** The fault kinds the runner injects, by name. */
export const FAULT_KINDS = {
  "kill-worker": { target: "worker", does: "SIGKILL a worker; start a new one on the same host when the fault ends" },
  "stop-worker": { target: "worker", does: "SIGSTOP a worker (hung, still connected); SIGCONT when the fault ends" },
  "kill-gateway": { target: "gateway", does: "SIGKILL a gateway; start a new one on the same host when the fault ends" },
  "stop-gateway": { target: "gateway", does: "SIGSTOP a gateway; SIGCONT when the fault ends" },
  "kill-broker": { target: "broker", does: "SIGKILL a broker; restart it on its own data when the fault ends" },
  "kill-controller": { target: "controller", does: "SIGKILL the active KRaft controller; restart it on its own data when the fault ends" },
  "stop-broker": { target: "broker", does: "SIGSTOP a broker (a silent leader); SIGCONT when the fault ends" },
  "restart-broker": { target: "broker", does: "stop a broker cleanly (SIGTERM); restart it on its own data when the fault ends" },
  "cut-host": { target: "any", does: "drop every packet to and from a host (both directions); heal when the fault ends" },
  "cut-host-inbound": { target: "any", does: "drop every packet a host receives (its own packets still leave); heal when the fault ends" },
  netem: { target: "any", does: "tc netem on a host's link: 80 ms delay, 40 ms jitter, 3% loss; removed when the fault ends" },
  "model-load-fail": {
    target: "worker",
    does: "restart a worker seeing its .onnx files corrupted (bind mounts only it sees: every load fails); restart it on the good ones when the fault ends",
  },
  "worker-memory-limit": {
    target: "worker",
    does: "limit a worker's memory cgroup to its anonymous memory (no page cache, no headroom); lift it (restart a killed worker) when the fault ends",
  },
  "move-coordinator": {
    target: "coordinator",
    does: "move the share group's coordinator to another broker (replica reorder + preferred election, no broker stops); move it back when the fault ends",
  },
} as const satisfies Record<string, FaultKindInfo>;

/** The name of an implemented fault kind. */
export type FaultKind = keyof typeof FAULT_KINDS;

/** Every implemented kind, in a fixed order (the schedule draws from it by index). */
export const FAULT_KIND_NAMES = Object.keys(FAULT_KINDS) as FaultKind[];

/** Kinds that need `tc` on the machine. */
export const NEEDS_TC: ReadonlySet<FaultKind> = new Set<FaultKind>(["netem"]);

/** Kinds that need a memory cgroup per worker (cgroup v2 with the memory controller, or v1's memory hierarchy). */
export const NEEDS_MEMORY_CGROUP: ReadonlySet<FaultKind> = new Set<FaultKind>(["worker-memory-limit"]);

/** Whether `name` is an implemented fault kind. */
export function isFaultKind(name: string): name is FaultKind {
  return Object.hasOwn(FAULT_KINDS, name);
}

/**
 * Parses a comma-separated list of fault kinds (`all` for every implemented one).
 * @throws Error naming every unknown name at once
 */
export function parseFaultKinds(list: string): FaultKind[] {
  const names = list
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (names.length === 0) throw new Error("--faults: expected a comma-separated list of fault kinds, got none");
  if (names.length === 1 && names[0] === "all") return [...FAULT_KIND_NAMES];
  const problems: string[] = [];
  const kinds: FaultKind[] = [];
  for (const n of names) {
    if (isFaultKind(n)) {
      if (!kinds.includes(n)) kinds.push(n);
    } else problems.push(`unknown fault kind '${n}'`);
  }
  if (problems.length > 0) throw new Error(`--faults: ${problems.join("; ")} (known: ${FAULT_KIND_NAMES.join(", ")})`);
  return kinds;
}

/** The role of a host from its label: `kafkaN` broker, `gwN` gateway, `wN` worker. */
export function roleOf(label: string): Role | undefined {
  if (/^kafka\d+$/.test(label)) return "broker";
  if (/^gw\d+$/.test(label)) return "gateway";
  if (/^w\d+$/.test(label)) return "worker";
  return undefined;
}
