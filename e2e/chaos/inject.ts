/**
 * The fault injectors: one small function per fault kind (fault-kinds.ts). Each starts its fault
 * on a host of the lab and returns how to heal it; `heal()` resolves when the host is back (a
 * process restarted and serving, rules or qdisc removed), so the heal time is when service could
 * resume.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Host } from "../harness/netns.ts";
import type { FaultKind } from "./fault-kinds.ts";
import type { ChaosLab } from "./lab.ts";
import { awaitExit, brokerPid, restartBroker } from "./processes.ts";

const exec = promisify(execFile);

/** A fault in progress. */
export interface Injection {
  /** The host it hit (the controller resolved). */
  readonly target: string;
  /** Ends the fault; resolves when the target is back. Returns a note for the history. */
  heal(): Promise<string>;
}

type Injector = (lab: ChaosLab, target: string) => Promise<Injection>;

async function netnsExec(host: Host, cmd: string, args: readonly string[]): Promise<void> {
  await exec("ip", host.argv(cmd, args), { timeout: 15_000 });
}

function hostOf(lab: ChaosLab, label: string): Host {
  const h = lab.hosts.get(label);
  if (h === undefined) throw new Error(`no host '${label}' in the lab`);
  return h;
}

/** SIGKILL a worker or gateway; start a new one on the same host at the heal. */
function killService(role: "worker" | "gateway"): Injector {
  return async (lab, target) => {
    const svc = (role === "worker" ? lab.workers : lab.gateways).get(target);
    if (svc === undefined) throw new Error(`no ${role} on ${target}`);
    await svc.proc.stop("SIGKILL");
    return {
      target,
      heal: async () => {
        const t0 = performance.now();
        await (role === "worker" ? lab.startWorker(target) : lab.startGateway(target));
        return `${role} restarted, serving after ${((performance.now() - t0) / 1000).toFixed(1)} s`;
      },
    };
  };
}

/** SIGSTOP a worker or gateway; SIGCONT at the heal. */
function stopService(role: "worker" | "gateway"): Injector {
  return async (lab, target) => {
    const svc = (role === "worker" ? lab.workers : lab.gateways).get(target);
    if (svc === undefined) throw new Error(`no ${role} on ${target}`);
    svc.proc.signal("SIGSTOP");
    return {
      target,
      heal: async () => {
        svc.proc.signal("SIGCONT");
        return "resumed";
      },
    };
  };
}

/** Stops a broker with `signal` (SIGKILL or SIGTERM); restarts it on its own data at the heal. */
function downBroker(signal: "SIGKILL" | "SIGTERM"): Injector {
  return async (lab, target) => {
    const host = hostOf(lab, target);
    const env = lab.brokerEnv.get(target);
    const pid = await brokerPid(host);
    if (pid === undefined || env === undefined) throw new Error(`no running broker on ${target}`);
    process.kill(pid, signal);
    const exited = await awaitExit(pid, signal === "SIGTERM" ? 30_000 : 5_000);
    return {
      target,
      heal: async () => {
        const t0 = performance.now();
        await restartBroker(host, env);
        return `broker pid ${pid} ${signal === "SIGTERM" ? (exited ? "stopped cleanly" : "killed after 30 s of SIGTERM") : "killed"}; restarted on its own data, serving after ${((performance.now() - t0) / 1000).toFixed(1)} s`;
      },
    };
  };
}

/**
 * The host a scheduled target names now: `controller` is the active KRaft controller, read from
 * the brokers' logs when the fault starts; a host label is itself.
 */
export async function resolveTarget(lab: ChaosLab, target: string): Promise<string> {
  if (target !== "controller") return target;
  const id = await lab.kafka.activeController();
  if (id === undefined) throw new Error("no broker has logged its activation as the controller");
  return `kafka${id}`;
}

/** SIGSTOP a broker; SIGCONT at the heal. */
const stopBroker: Injector = async (lab, target) => {
  const pid = await brokerPid(hostOf(lab, target));
  if (pid === undefined) throw new Error(`no running broker on ${target}`);
  process.kill(pid, "SIGSTOP");
  return {
    target,
    heal: async () => {
      process.kill(pid, "SIGCONT");
      return `broker pid ${pid} resumed`;
    },
  };
};

/** Drops every packet to and from the host (both directions). */
const cutHost: Injector = async (lab, target) => {
  const host = hostOf(lab, target);
  await lab.net.isolate(host);
  return {
    target,
    heal: async () => {
      await lab.net.heal(host);
      return "healed";
    },
  };
};

/** Drops every packet the host receives; what it sends still leaves (one direction only). */
const cutHostInbound: Injector = async (lab, target) => {
  const host = hostOf(lab, target);
  const rule = ["INPUT", "-i", "eth0", "-j", "DROP"];
  await netnsExec(host, "iptables", ["-w", "-A", ...rule]);
  return {
    target,
    heal: async () => {
      await netnsExec(host, "iptables", ["-w", "-D", ...rule]);
      return "healed";
    },
  };
};

/** The netem settings of the `netem` kind. */
export const NETEM = ["delay", "80ms", "40ms", "loss", "3%"] as const;

/** Latency, jitter and loss on the host's link (its eth0's egress). */
const netem: Injector = async (lab, target) => {
  const host = hostOf(lab, target);
  await netnsExec(host, "tc", ["qdisc", "add", "dev", "eth0", "root", "netem", ...NETEM]);
  return {
    target,
    heal: async () => {
      await netnsExec(host, "tc", ["qdisc", "del", "dev", "eth0", "root"]);
      return "qdisc removed";
    },
  };
};

/** The injector of each fault kind. */
export const INJECTORS: Readonly<Record<FaultKind, Injector>> = {
  "kill-worker": killService("worker"),
  "stop-worker": stopService("worker"),
  "kill-gateway": killService("gateway"),
  "stop-gateway": stopService("gateway"),
  "kill-broker": downBroker("SIGKILL"),
  "kill-controller": downBroker("SIGKILL"),
  "stop-broker": stopBroker,
  "restart-broker": downBroker("SIGTERM"),
  "cut-host": cutHost,
  "cut-host-inbound": cutHostInbound,
  netem,
};
