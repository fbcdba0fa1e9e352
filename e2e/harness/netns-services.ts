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

function startOn(kind: "gateway" | "worker", host: Host, name: string, env: Record<string, string>): ServiceProcess {
  return ServiceProcess.spawn(name, "ip", host.argv(process.execPath, [...SERVICE_NODE_FLAGS, ...serviceEntry(kind)]), { LOG_LEVEL: "info", ...env });
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
export async function startWorkerOn(host: Host, s: ServiceSettings, env: Record<string, string> = {}): Promise<HostedService> {
  const id = `${s.pool}-${host.label}`;
  const proc = startOn("worker", host, id, {
    KAFKA_BROKERS: s.brokers,
    SHOAL_CATALOG: s.catalogPath,
    SHOAL_POOL: s.pool,
    SHOAL_WORKER_ID: id,
    SHOAL_INFERENCE_THREADS: "1",
    SHOAL_INTRA_OP_THREADS: "1",
    SHOAL_HTTP_HOST: host.ip,
    SHOAL_HTTP_PORT: String(WORKER_HTTP_PORT),
    ...env,
  });
  try {
    await proc.waitForLog((l) => l.msg === "worker pulling jobs");
    return { host, proc, url: `http://${host.ip}:${WORKER_HTTP_PORT}` };
  } catch (err) {
    await proc.stop("SIGKILL");
    throw err;
  }
}
