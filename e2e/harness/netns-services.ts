/**
 * Shoal gateways and workers on network-namespace hosts (see netns.ts): the same entry points and
 * settings as cluster.ts (`serviceEntry`), each process started through `ip netns exec <ns> node ...` (which execs,
 * so the child's pid is node's and signals reach the service itself). Gateways listen on their
 * host's address, port 8080; workers' health/metrics on theirs, port 9464.
 */
import type { Host } from "./netns.ts";
import { SERVICE_NODE_FLAGS, ServiceProcess, serviceEntry } from "./service-process.ts";

export const GATEWAY_PORT = 8080;
export const WORKER_HTTP_PORT = 9464;

/** A service on a host: its process and the base URL of its HTTP endpoint. */
export interface HostedService {
  readonly host: Host;
  readonly proc: ServiceProcess;
  readonly url: string;
}

/** How a worker is launched beyond its environment (the chaos campaign's faults). */
export interface LaunchOptions {
  /** A cgroup's `cgroup.procs`: the process runs inside that cgroup from its first instruction. */
  readonly cgroupProcs?: string;
  /** `[source, target]` pairs bind-mounted in a mount namespace of the process's own: files that only it sees. */
  readonly bindMounts?: ReadonlyArray<readonly [string, string]>;
}

// Enters the cgroup ($1, may be empty), makes the bind mounts (pairs up to "--"), then execs
// `ip netns exec`, which remounts /sys (hiding the cgroup tree) but keeps the mounts: one pid, node's.
const LAUNCH_SCRIPT =
  'cg=$1; shift; if [ -n "$cg" ]; then echo $$ > "$cg" || exit 1; fi; while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; exec ip "$@"';

function startOn(kind: "gateway" | "worker", host: Host, name: string, env: Record<string, string>, launch: LaunchOptions = {}): ServiceProcess {
  const argv = host.argv(process.execPath, [...SERVICE_NODE_FLAGS, ...serviceEntry(kind)]);
  const binds = launch.bindMounts ?? [];
  if (launch.cgroupProcs === undefined && binds.length === 0) return ServiceProcess.spawn(name, "ip", argv, { LOG_LEVEL: "info", ...env });
  const sh = ["-c", LAUNCH_SCRIPT, "sh", launch.cgroupProcs ?? "", ...binds.flat(), "--", ...argv];
  // unshare (no --fork) execs the shell in a mount namespace of its own: the same pid still.
  const [command, args] = binds.length === 0 ? ["sh", sh] : ["unshare", ["--mount", "--propagation", "private", "sh", ...sh]];
  return ServiceProcess.spawn(name, command, args, { LOG_LEVEL: "info", ...env });
}

/** Common settings: the brokers and the catalog. */
export interface ServiceSettings {
  readonly brokers: string;
  readonly catalogPath: string;
  readonly pool: string;
}

/**
 * A gateway serving on `host.ip:8080` without TLS or keys (SHOAL_INSECURE_PUBLIC=1: a private
 * test network); resolves once it serves, with its reply topic.
 */
export async function startGatewayOn(host: Host, s: ServiceSettings, env: Record<string, string> = {}): Promise<HostedService & { replyTopic: string }> {
  const proc = startOn("gateway", host, `${s.pool}-${host.label}`, {
    KAFKA_BROKERS: s.brokers,
    SHOAL_CATALOG: s.catalogPath,
    SHOAL_HOST: host.ip,
    SHOAL_PORT: String(GATEWAY_PORT),
    SHOAL_INSECURE_PUBLIC: "1",
    // Workers on the other hosts hand results to this gateway over the hosts' network.
    SHOAL_DIRECT_REPLY_HOST: host.ip,
    SHOAL_INSTANCE_ID: `${s.pool}-${host.label}`,
    // Off, as in every e2e gateway (harness/service-process.ts): calls that send the same texts
    // again would be answered from it, never reaching the queue and the faults under test.
    SHOAL_EMBED_CACHE_BYTES: "0",
    ...env,
  });
  try {
    const line = await proc.waitForLog((l) => l.msg === "gateway serving");
    return { host, proc, url: `http://${host.ip}:${GATEWAY_PORT}`, replyTopic: String(line["replyTopic"]) };
  } catch (err) {
    await proc.stop("SIGKILL");
    throw err;
  }
}

/** A lean worker (one inference thread, one intra-op thread) on `host`; resolves once it pulls jobs. */
export async function startWorkerOn(host: Host, s: ServiceSettings, env: Record<string, string> = {}, launch: LaunchOptions = {}): Promise<HostedService> {
  const id = `${s.pool}-${host.label}`;
  const proc = startOn(
    "worker",
    host,
    id,
    {
      KAFKA_BROKERS: s.brokers,
      SHOAL_CATALOG: s.catalogPath,
      SHOAL_POOL: s.pool,
      SHOAL_WORKER_ID: id,
      SHOAL_INFERENCE_THREADS: "1",
      SHOAL_INTRA_OP_THREADS: "1",
      SHOAL_HTTP_HOST: host.ip,
      SHOAL_HTTP_PORT: String(WORKER_HTTP_PORT),
      ...env,
    },
    launch,
  );
  try {
    await proc.waitForLog((l) => l.msg === "worker pulling jobs");
    return { host, proc, url: `http://${host.ip}:${WORKER_HTTP_PORT}` };
  } catch (err) {
    await proc.stop("SIGKILL");
    throw err;
  }
}
