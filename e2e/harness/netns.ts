/**
 * Network namespaces as hosts on one machine: a Linux bridge in the root namespace, one namespace
 * per host joined to it by a veth pair, all on a private /24 (10.77.N.0/24, N free at start, so
 * parallel runs get their own subnet). The root namespace owns the bridge's address (.1) and
 * reaches every host, so a test process there is one more host on the network.
 *
 * Partitions are packet drops (iptables in the hosts' own namespaces, the root's rules untouched):
 * both ends drop what arrives from the other, so neither side gets an error, only silence — what
 * a cut cable or a dead switch port looks like. Needs root, iproute2 and iptables; `netnsProblem()`
 * says why a test must skip.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";

const exec = promisify(execFile);

/** Runs a command; rejects with its stderr on failure. */
async function sh(cmd: string, args: readonly string[]): Promise<string> {
  try {
    return (await exec(cmd, args, { timeout: 15_000 })).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")}: ${(e.stderr ?? "").trim() || e.message}`);
  }
}

/** One host: a network namespace with one interface (eth0) on the lab's bridge. */
export interface Host {
  /** The test's name for it, e.g. `broker1`. */
  readonly label: string;
  /** The namespace's name (unique per run). */
  readonly ns: string;
  /** Its address on the bridge. */
  readonly ip: string;
  /** `ip netns exec <ns> command ...args`: the argv that runs a command on this host. */
  argv(command: string, args: readonly string[]): string[];
}

export interface NetLab {
  /** `10.77.N.0/24`. */
  readonly subnet: string;
  /** The root namespace's address on the bridge (the test process's "host"). */
  readonly rootIp: string;
  readonly hosts: readonly Host[];
  /** Adds a host (a namespace on the bridge) with the next free address. */
  addHost(label: string): Promise<Host>;
  /** Drops every packet between `host` and each of `peers` (both directions); the root namespace is never cut. */
  partition(host: Host, peers: readonly Host[]): Promise<void>;
  /** Drops every packet `host` receives from the bridge, and every packet other hosts receive from it. */
  isolate(host: Host): Promise<void>;
  /** Removes every drop rule that involves `host`. */
  heal(host: Host): Promise<void>;
  /** Deletes the namespaces (their veths go with them) and the bridge. Idempotent; never throws. */
  destroy(): Promise<void>;
}

/** Why network namespaces cannot be used here (not root, no `ip` or `iptables`), or undefined when they can. */
export async function netnsProblem(): Promise<string | undefined> {
  if (process.platform !== "linux") return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "network namespaces need root (ip netns add, iptables)";
  for (const [cmd, args] of [
    ["ip", ["-V"]],
    ["iptables", ["--version"]],
  ] as const) {
    try {
      await sh(cmd, args);
    } catch (err) {
      return `${cmd} is not usable: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  // Root without CAP_SYS_ADMIN / CAP_NET_ADMIN (some containers) cannot make a namespace: try one.
  const probe = `shoal-probe-${randomBytes(3).toString("hex")}`;
  try {
    await sh("ip", ["netns", "add", probe]);
    await sh("ip", ["netns", "exec", probe, "iptables", "-w", "-S"]);
  } catch (err) {
    return `cannot create a network namespace with iptables in it: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    await sh("ip", ["netns", "delete", probe]).catch(() => undefined);
  }
  return undefined;
}

/** A /24 under 10.77.0.0/16 that no route in the root namespace uses yet. */
async function freeSubnet(): Promise<number> {
  const routes = await sh("ip", ["-4", "route", "show"]);
  const used = new Set([...routes.matchAll(/^10\.77\.(\d+)\./gm)].map((m) => Number(m[1])));
  for (let attempt = 0; attempt < 100; attempt++) {
    const n = 1 + Math.floor(Math.random() * 250);
    if (!used.has(n)) return n;
  }
  throw new Error("no free 10.77.N.0/24 subnet for the network lab");
}

/** Whether `ns` exists. */
async function nsExists(ns: string): Promise<boolean> {
  return (await sh("ip", ["netns", "list"])).split("\n").some((l) => l.split(" ")[0] === ns);
}

/**
 * Creates the bridge (`shbr<id>`) and nothing else; hosts come with `addHost`. Names carry a random
 * id, so parallel runs never collide. Call `destroy()` in `after` (a failed start cleans up itself).
 */
export async function createNetLab(): Promise<NetLab> {
  const id = randomBytes(3).toString("hex");
  const n = await freeSubnet();
  const prefix = `10.77.${n}`;
  const bridge = `shbr${id}`;
  const hosts: Host[] = [];
  const nsList: string[] = [];
  const veths: string[] = [];
  // Rules per host: the (namespace, rule) pairs added for it, so heal removes exactly those.
  const rules = new Map<string, Array<{ ns: string; spec: string[] }>>();
  let nextOctet = 10;
  let destroyed = false;

  const destroy = async (): Promise<void> => {
    if (destroyed) return;
    destroyed = true;
    // Deleting a veth deletes its peer too; a namespace's own teardown can lag (sockets still closing hold it).
    for (const veth of veths) await sh("ip", ["link", "delete", veth]).catch(() => undefined);
    for (const ns of nsList) await sh("ip", ["netns", "delete", ns]).catch(() => undefined);
    await sh("ip", ["link", "delete", bridge]).catch(() => undefined);
  };

  const drop = async (ns: string, owner: Host, spec: string[]): Promise<void> => {
    await sh("ip", ["netns", "exec", ns, "iptables", "-w", "-A", ...spec, "-j", "DROP"]);
    const list = rules.get(owner.ns) ?? [];
    list.push({ ns, spec });
    rules.set(owner.ns, list);
  };

  try {
    await sh("ip", ["link", "add", bridge, "type", "bridge"]);
    await sh("ip", ["addr", "add", `${prefix}.1/24`, "dev", bridge]);
    await sh("ip", ["link", "set", bridge, "up"]);
  } catch (err) {
    await destroy();
    throw err;
  }

  const lab: NetLab = {
    subnet: `${prefix}.0/24`,
    rootIp: `${prefix}.1`,
    hosts,
    async addHost(label) {
      if (destroyed) throw new Error("the network lab was destroyed");
      if (!/^[a-z0-9-]{1,20}$/.test(label)) throw new RangeError(`host label must be 1-20 of [a-z0-9-], got '${label}'`);
      if (nextOctet > 250) throw new RangeError("the network lab is full");
      const octet = nextOctet++;
      const ns = `shoal-${id}-${label}`;
      const veth = `sh${id}v${octet}`;
      const ip = `${prefix}.${octet}`;
      if (await nsExists(ns)) throw new Error(`namespace ${ns} exists already`);
      await sh("ip", ["netns", "add", ns]);
      nsList.push(ns);
      await sh("ip", ["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns]);
      veths.push(veth);
      await sh("ip", ["link", "set", veth, "master", bridge]);
      await sh("ip", ["link", "set", veth, "up"]);
      await sh("ip", ["-n", ns, "addr", "add", `${ip}/24`, "dev", "eth0"]);
      await sh("ip", ["-n", ns, "link", "set", "eth0", "up"]);
      await sh("ip", ["-n", ns, "link", "set", "lo", "up"]);
      const host: Host = { label, ns, ip, argv: (command, args) => ["netns", "exec", ns, command, ...args] };
      hosts.push(host);
      return host;
    },
    async partition(host, peers) {
      for (const peer of peers) {
        await drop(host.ns, host, ["INPUT", "-s", peer.ip]);
        await drop(peer.ns, host, ["INPUT", "-s", host.ip]);
      }
    },
    async isolate(host) {
      await drop(host.ns, host, ["INPUT", "-i", "eth0"]);
      for (const peer of hosts) if (peer !== host) await drop(peer.ns, host, ["INPUT", "-s", host.ip]);
    },
    async heal(host) {
      for (const { ns, spec } of rules.get(host.ns) ?? []) await sh("ip", ["netns", "exec", ns, "iptables", "-w", "-D", ...spec, "-j", "DROP"]);
      rules.delete(host.ns);
    },
    destroy,
  };
  return lab;
}
