/**
 * The chaos campaign's lab: network-namespace hosts on a bridge (e2e/harness/netns.ts), three
 * Kafka brokers with replication 3 (kafka1..3), two gateways (gw1, gw2) and three workers (w1..3)
 * serving a tiny embedder, reranker and classifier; the runner's clients are in the root namespace.
 * Each worker runs in a memory cgroup of its own, unlimited until a `worker-memory-limit` fault.
 * `teardown()` is idempotent and leaves nothing behind: every process in a lab namespace is
 * killed, the brokers' data removed (or kept for a failed run), the namespaces and bridge deleted.
 */
import { PRESETS } from "@shoal/models";
import { writeCatalog } from "../harness/cluster.ts";
import { createNetLab, type Host, type NetLab } from "../harness/netns.ts";
import { type NetnsKafka, startNetnsKafka } from "../harness/netns-kafka.ts";
import { type HostedService, type LaunchOptions, type ServiceSettings, startGatewayOn, startWorkerOn } from "../harness/netns-services.ts";
import type { ServiceProcess } from "../harness/service-process.ts";
import { createMemoryCgroups, type MemoryCgroups } from "./memory-cgroup.ts";
import { brokerPid, environOf, killEverythingIn } from "./processes.ts";

/** The model ids the lab serves, by task. */
export const LAB_MODELS = { embed: PRESETS.tiny.id, rerank: PRESETS["tiny-rerank"].id, classify: PRESETS["tiny-classify"].id } as const;

/** Host labels of the lab, by role. */
export const LAB_HOSTS = { brokers: ["kafka1", "kafka2", "kafka3"], gateways: ["gw1", "gw2"], workers: ["w1", "w2", "w3"] } as const;

/** Every host label of the lab. */
export const ALL_LAB_HOSTS: readonly string[] = [...LAB_HOSTS.brokers, ...LAB_HOSTS.gateways, ...LAB_HOSTS.workers];

/** Settings every service of the lab gets: debug lines name each job, so a lost call can be followed. */
const SERVICE_ENV = { LOG_LEVEL: "debug" };

/** A started lab. Maps are by host label and hold the current process (a restarted one replaces it). */
export interface ChaosLab {
  readonly net: NetLab;
  readonly hosts: ReadonlyMap<string, Host>;
  readonly kafka: NetnsKafka;
  readonly settings: ServiceSettings;
  /** The served models' folders (the catalog's paths), for a worker that sees broken files in them. */
  readonly modelDirs: readonly string[];
  /** The workers' memory cgroups, or why there are none on this machine. */
  readonly memory: MemoryCgroups | string;
  readonly gateways: Map<string, HostedService>;
  readonly workers: Map<string, HostedService>;
  /** Each broker's kafka.sh environment, for a restart on its own data. */
  readonly brokerEnv: ReadonlyMap<string, NodeJS.ProcessEnv>;
  /** Every service process started, restarts included (their logs go into the history). */
  readonly processes: ServiceProcess[];
  /** Starts a worker on `label` (in its memory cgroup); `bindMounts` are files only this worker sees. */
  startWorker(label: string, opts?: Pick<LaunchOptions, "bindMounts">): Promise<HostedService>;
  startGateway(label: string): Promise<HostedService>;
}

/** A lab being built: what exists so far, so that an interrupt can tear down a half-built one. */
export interface LabHandle {
  lab: ChaosLab | undefined;
  /** What the start is waiting on now (for a "did not come up" message). */
  step: string;
  /** Tears down whatever exists; idempotent, never throws. With `keepIn`, keeps the brokers' data there. */
  teardown(keepIn?: string): Promise<void>;
}

/** A handle with nothing started yet. */
export function createLabHandle(): LabHandle & { parts: { net?: NetLab; kafka?: NetnsKafka; memory?: MemoryCgroups } } {
  const parts: { net?: NetLab; kafka?: NetnsKafka; memory?: MemoryCgroups } = {};
  let done: Promise<void> | undefined;
  const handle = {
    lab: undefined as ChaosLab | undefined,
    step: "nothing yet",
    parts,
    teardown(keepIn?: string): Promise<void> {
      done ??= (async () => {
        const hosts = parts.net?.hosts ?? [];
        const killed = await killEverythingIn(hosts);
        await parts.kafka?.stop(keepIn).catch(() => undefined);
        await killEverythingIn(hosts);
        await parts.memory?.remove();
        await parts.net?.destroy();
        process.stderr.write(`chaos: lab torn down (${killed} processes killed, ${hosts.length} namespaces deleted)\n`);
      })();
      return done;
    },
  };
  return handle;
}

/**
 * Starts the lab into `handle` (so a teardown during the start finds what exists).
 * @throws Error naming the step that failed
 */
export async function startChaosLab(handle: ReturnType<typeof createLabHandle>, progress: (msg: string) => void): Promise<ChaosLab> {
  handle.step = "creating the network lab";
  const net = await createNetLab();
  handle.parts.net = net;
  const hosts = new Map<string, Host>();
  for (const label of ALL_LAB_HOSTS) {
    handle.step = `adding host ${label}`;
    hosts.set(label, await net.addHost(label));
  }
  const at = (label: string): Host => hosts.get(label)!;
  progress(`network lab on ${net.subnet}: ${ALL_LAB_HOSTS.join(", ")}`);
  handle.step = "starting three Kafka brokers (kafka1..3)";
  const kafka = await startNetnsKafka(LAB_HOSTS.brokers.map(at));
  handle.parts.kafka = kafka;
  const brokerEnv = new Map<string, NodeJS.ProcessEnv>();
  for (const label of LAB_HOSTS.brokers) {
    const pid = await brokerPid(at(label));
    if (pid === undefined) throw new Error(`broker on ${label} is not running after start`);
    brokerEnv.set(label, await environOf(pid));
  }
  handle.step = "writing the catalog (tiny embedder, reranker, classifier)";
  const { path: catalogPath, pool, dirs: modelDirs } = await writeCatalog(["tiny", "tiny-rerank", "tiny-classify"], 3, "share");
  const settings: ServiceSettings = { brokers: kafka.brokers, catalogPath, pool };
  const memory = await createMemoryCgroups(`shoal-chaos-${process.pid}`);
  if (typeof memory === "string") progress(`workers run without memory cgroups: ${memory}`);
  else handle.parts.memory = memory;
  const processes: ServiceProcess[] = [];
  const gateways = new Map<string, HostedService>();
  const workers = new Map<string, HostedService>();
  const startWorker = async (label: string, opts: Pick<LaunchOptions, "bindMounts"> = {}): Promise<HostedService> => {
    const cgroup = typeof memory === "string" ? undefined : await memory.forHost(label);
    const w = await startWorkerOn(at(label), settings, SERVICE_ENV, { ...opts, ...(cgroup ? { cgroupProcs: cgroup.procsFile } : {}) });
    processes.push(w.proc);
    workers.set(label, w);
    return w;
  };
  const startGateway = async (label: string): Promise<HostedService> => {
    const g = await startGatewayOn(at(label), settings, SERVICE_ENV);
    processes.push(g.proc);
    gateways.set(label, g);
    return g;
  };
  handle.step = `starting workers ${LAB_HOSTS.workers.join(", ")}`;
  await Promise.all(LAB_HOSTS.workers.map((l) => startWorker(l)));
  handle.step = `starting gateways ${LAB_HOSTS.gateways.join(", ")}`;
  await Promise.all(LAB_HOSTS.gateways.map(startGateway));
  const lab: ChaosLab = { net, hosts, kafka, settings, modelDirs, memory, gateways, workers, brokerEnv, processes, startWorker, startGateway };
  handle.lab = lab;
  handle.step = "up";
  return lab;
}
