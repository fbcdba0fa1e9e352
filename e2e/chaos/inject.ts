/**
 * The fault injectors: one small function per fault kind (fault-kinds.ts). Each starts its fault
 * on a host of the lab and returns how to heal it; `heal()` resolves when the host is back (a
 * process restarted and serving, rules or qdisc removed), so the heal time is when service could
 * resume.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, open, readFile, rm, stat, utimes } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { poolGroupId } from "@shoal/worker/intake/create-intake";
import type { Host } from "../harness/netns.ts";
import { type CoordinatorPlace, findCoordinator, kafkaClasspath, moveCoordinator, restoreCoordinator } from "./coordinator.ts";
import type { FaultKind } from "./fault-kinds.ts";
import { LAB_HOSTS, type ChaosLab } from "./lab.ts";
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
 * the brokers' logs when the fault starts; `coordinator` the broker that coordinates the pool's
 * share group (FindCoordinator); a host label is itself.
 */
export async function resolveTarget(lab: ChaosLab, target: string): Promise<string> {
  if (target === "coordinator") return `kafka${(await findCoordinator(lab.kafka.brokers, poolGroupId(lab.settings.pool))).coordinator}`;
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

const secondsSince = (t0: number): string => ((performance.now() - t0) / 1000).toFixed(1);
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);

/** The worker on `target`, or why there is none. */
function workerOn(lab: ChaosLab, target: string) {
  const w = lab.workers.get(target);
  if (w === undefined || !w.proc.running) throw new Error(`no running worker on ${target}`);
  return w;
}

/** Bytes zeroed at the head of each broken ONNX file: no ONNX parser accepts what is left as a model. */
const ZEROED_ONNX_BYTES = 64 * 1024;

/**
 * Broken copies of the lab's ONNX files, each bind-mounted over the original for one worker only:
 * the same paths, sizes and times (so the same catalog and the same folder revisions as every other
 * process sees), but a head of zeros, as on a disk that corrupted them. A changed catalog would not
 * do: a worker reseeds the pool's shared registry from its YAML when the declaration differs, and
 * every worker would then load the broken copies.
 */
async function brokenModels(lab: ChaosLab, target: string): Promise<{ dir: string; bindMounts: Array<[string, string]> }> {
  const dir = await mkdtemp(join(tmpdir(), `shoal-chaos-broken-${target}-`));
  const bindMounts: Array<[string, string]> = [];
  for (const d of lab.modelDirs) {
    const manifest = JSON.parse(await readFile(join(d, "shoal-model.json"), "utf8")) as { onnx?: { file?: string } };
    const original = join(d, manifest.onnx?.file ?? "model.onnx");
    const copy = join(dir, `${basename(d)}.onnx`);
    await cp(original, copy);
    const fh = await open(copy, "r+");
    try {
      await fh.write(Buffer.alloc(ZEROED_ONNX_BYTES), 0, ZEROED_ONNX_BYTES, 0);
    } finally {
      await fh.close();
    }
    const st = await stat(original);
    await utimes(copy, st.atime, st.mtime);
    bindMounts.push([copy, original]);
  }
  return { dir, bindMounts };
}

/** What a worker's /readyz says (status and reason), or why it did not answer. */
async function readiness(url: string): Promise<string> {
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
    return `/readyz ${res.status} "${(await res.text()).trim()}"`;
  } catch (err) {
    return `/readyz unanswered (${err instanceof Error ? err.message : String(err)})`;
  }
}

/**
 * A worker whose model loads fail: stopped cleanly (SIGTERM: its jobs drain) and started again
 * seeing corrupted ONNX files; at the heal, the same seeing the good ones. Every load fails, at start
 * and on each job's retry; its jobs should go back to the queue for the other workers.
 */
const modelLoadFail: Injector = async (lab, target) => {
  const old = workerOn(lab, target);
  const broken = await brokenModels(lab, target);
  await old.proc.stop("SIGTERM");
  let w: Awaited<ReturnType<ChaosLab["startWorker"]>>;
  try {
    w = await lab.startWorker(target, { bindMounts: broken.bindMounts });
  } catch (err) {
    // The worker must not stay down for a fault that did not take: back on the good models.
    await lab.startWorker(target);
    await rm(broken.dir, { recursive: true, force: true });
    throw new Error(`the worker did not start on broken models: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`);
  }
  const atStart = `${w.proc.logs.filter((l) => l.msg === "start-up load failed; the model's jobs will retry it").length} start-up load failures, ${await readiness(w.url)}`;
  return {
    target,
    heal: async () => {
      const count = (msg: string): number => w.proc.logs.filter((l) => l.msg === msg).length;
      const failed = count("model failed to load");
      const givenBack = count("model could not be loaded here; giving the job back to the queue");
      const t0 = performance.now();
      await w.proc.stop("SIGTERM");
      await lab.startWorker(target);
      await rm(broken.dir, { recursive: true, force: true });
      return `on broken models: ${atStart}; ${failed} failed loads, ${givenBack} jobs given back; restarted on the good models, serving after ${secondsSince(t0)} s`;
    },
  };
};

/** Limits tried over the worker's anonymous memory, smallest first: cgroup v1 refuses one it cannot reclaim down to. */
const MEMORY_HEADROOM_STEPS = [0, 1, 2, 4, 8, 16].map((mib) => mib * 2 ** 20);

/**
 * A worker at its memory limit: its cgroup's limit set to the lowest the kernel takes at or above
 * its anonymous memory (v2 takes that at once, reclaiming the page cache and OOM-killing when it
 * cannot); any growth then means reclaim, then an OOM kill. At the heal the limit is lifted, and a
 * worker that was killed is started again.
 */
const workerMemoryLimit: Injector = async (lab, target) => {
  if (typeof lab.memory === "string") throw new Error(`workers have no memory cgroup: ${lab.memory}`);
  const w = workerOn(lab, target);
  const cg = await lab.memory.forHost(target);
  const before = await cg.usage();
  const pressure0 = await cg.pressure();
  let limit: number | undefined;
  let refused = "";
  for (const bytes of [...MEMORY_HEADROOM_STEPS.map((h) => before.anonBytes + h), before.totalBytes + MEMORY_HEADROOM_STEPS.at(-1)!]) {
    try {
      await cg.limit(bytes);
      limit = bytes;
      break;
    } catch (err) {
      refused = err instanceof Error ? err.message : String(err);
    }
  }
  if (limit === undefined) throw new Error(`the kernel refused every limit down to ${mib(before.anonBytes)} MiB: ${refused}`);
  const set = `limit ${mib(limit)} MiB (cgroup v${lab.memory.version}; ${mib(before.anonBytes)} MiB anonymous of ${mib(before.totalBytes)} MiB charged)`;
  return {
    target,
    heal: async () => {
      const p = await cg.pressure();
      const now = await cg.usage();
      await cg.unlimit();
      const hits = `${p.oomKills - pressure0.oomKills} OOM kills, limit hit ${p.limitHits - pressure0.limitHits} times`;
      if (w.proc.running) return `${set}; ${hits}; the worker survived at ${mib(now.totalBytes)} MiB; limit lifted`;
      const t0 = performance.now();
      await lab.startWorker(target);
      return `${set}; ${hits}; the worker died (exit ${await w.proc.exited}); limit lifted, restarted, serving after ${secondsSince(t0)} s`;
    },
  };
};

/**
 * The share group's coordinator moved to another in-sync broker with no broker stopped (the
 * target is the coordinator when the fault starts); moved back to its preferred replica at the heal.
 */
const moveCoordinatorFault: Injector = async (lab, target) => {
  const brokers = lab.kafka.brokers;
  const place: CoordinatorPlace = await findCoordinator(brokers, poolGroupId(lab.settings.pool));
  if (`kafka${place.coordinator}` !== target) throw new Error(`the coordinator is kafka${place.coordinator} now, not ${target}`);
  if (place.leader !== place.coordinator) throw new Error(`FindCoordinator names ${place.coordinator} but ${place.partition}'s leader is ${place.leader}`);
  const to = place.replicas.find((r) => r !== place.coordinator && place.isr.includes(r));
  if (to === undefined) throw new Error(`no other in-sync replica of __consumer_offsets-${place.partition} (isr ${place.isr.join(",")})`);
  const pid = (await Promise.all(LAB_HOSTS.brokers.map((b) => brokerPid(hostOf(lab, b))))).find((p) => p !== undefined);
  if (pid === undefined) throw new Error("no running broker to read Kafka's classpath from");
  const classpath = await kafkaClasspath(pid);
  const t0 = performance.now();
  await moveCoordinator(brokers, classpath, place, to);
  const moved = `__consumer_offsets-${place.partition} (replicas ${place.replicas.join(",")}): coordinator ${place.coordinator} -> ${to} in ${secondsSince(t0)} s`;
  return {
    target,
    heal: async () => {
      const t1 = performance.now();
      const back = await restoreCoordinator(brokers, classpath, place);
      return `${moved}; replica order restored, coordinator ${back.coordinator} after ${secondsSince(t1)} s`;
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
  "model-load-fail": modelLoadFail,
  "worker-memory-limit": workerMemoryLimit,
  "move-coordinator": moveCoordinatorFault,
};
