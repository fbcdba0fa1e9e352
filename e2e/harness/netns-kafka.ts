/**
 * A 3-node KRaft Kafka cluster with one node per network-namespace host (see netns.ts), run by
 * infra/kafka/kafka.sh from the cached jars. kafka.sh binds 127.0.0.1; the listeners, the
 * controller quorum and the replication settings are overridden through KAFKA_EXTRA_PROPERTIES
 * (later keys win): clients listen on 0.0.0.0:9092 in the host's namespace (so kafka.sh's
 * readiness probe on 127.0.0.1 works) and advertise the host's address; controllers listen on the
 * host's address. Every host uses the same ports: each has its own network stack.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KAFKA_SH, mustRun, REPO_ROOT } from "../../infra/dev/shell.ts";
import type { Host } from "./netns.ts";

export const KAFKA_CLIENT_PORT = 9092;
const CONTROLLER_PORT = 9093;

export interface NetnsKafka {
  /** `ip1:9092,ip2:9092,ip3:9092`. */
  readonly brokers: string;
  /** Node id (broker id in metadata) of each host, in order: 1, 2, 3. */
  readonly ids: readonly number[];
  /**
   * The last `n` WARN and ERROR lines of each node's server.log (with the node id), for a test to
   * print when it fails: why a follower fell behind, what a controller fenced and when.
   */
  warnings(n?: number): Promise<string>;
  /**
   * The node that last logged its activation as the KRaft controller (the active controller), or
   * undefined when no log says so yet.
   */
  activeController(): Promise<number | undefined>;
  /**
   * Kills every node and removes the data; with `keepIn`, moves each node's data dir and
   * server.log there instead (`keepIn/kafka/node-N`), for a failed run to be read afterwards (the
   * partitions' logs with kafka.tools.DumpLogSegments, what each broker logged). Never throws.
   */
  stop(keepIn?: string): Promise<void>;
}

/** Runs `kafka.sh <command>` on `host` (inside its namespace); resolves with the exit code and output. */
function kafkaSh(host: Host, command: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("ip", host.argv("bash", [KAFKA_SH, command]), { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

/** A Kafka cluster id: 16 random bytes, URL-safe base64, no leading '-'. */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}

/**
 * Starts one broker+controller per host (3 hosts: replication factor 3, min ISR 2, internal topics
 * too), together, and waits until each serves. On failure everything started is killed.
 */
export async function startNetnsKafka(hosts: readonly Host[], heap = "384m"): Promise<NetnsKafka> {
  if (hosts.length !== 3) throw new RangeError(`startNetnsKafka: 3 hosts, got ${hosts.length}`);
  const root = await mkdtemp(join(tmpdir(), "shoal-netns-kafka-"));
  const id = clusterId();
  const ids = hosts.map((_, i) => i + 1);
  const voters = hosts.map((h, i) => `${i + 1}@${h.ip}:${CONTROLLER_PORT}`).join(",");
  const envs: NodeJS.ProcessEnv[] = [];
  for (const [i, host] of hosts.entries()) {
    const dataDir = join(root, `node-${i + 1}`);
    await mkdir(dataDir, { recursive: true });
    const extra = join(root, `node-${i + 1}.properties`);
    await writeFile(
      extra,
      [
        `controller.quorum.voters=${voters}`,
        `listeners=PLAINTEXT://0.0.0.0:${KAFKA_CLIENT_PORT},CONTROLLER://${host.ip}:${CONTROLLER_PORT}`,
        `advertised.listeners=PLAINTEXT://${host.ip}:${KAFKA_CLIENT_PORT}`,
        "default.replication.factor=3",
        "min.insync.replicas=2",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.replication.factor=3",
        "transaction.state.log.min.isr=2",
        "share.coordinator.state.topic.replication.factor=3",
        "share.coordinator.state.topic.min.isr=2",
        "",
      ].join("\n"),
    );
    envs.push({
      ...process.env,
      KAFKA_PORT: String(KAFKA_CLIENT_PORT),
      KAFKA_CONTROLLER_PORT: String(CONTROLLER_PORT),
      KAFKA_DATA_DIR: dataDir,
      KAFKA_NODE_ID: String(i + 1),
      // kafka.sh checks that the quorum lists this node on 127.0.0.1; the real one is in the extra file.
      KAFKA_CONTROLLER_QUORUM: `${i + 1}@127.0.0.1:${CONTROLLER_PORT}`,
      KAFKA_CLUSTER_ID: id,
      KAFKA_EXTRA_PROPERTIES: extra,
      KAFKA_HEAP: heap,
    });
  }
  const killAll = async (keepIn?: string): Promise<void> => {
    await Promise.all(hosts.map((h, i) => kafkaSh(h, "kill", envs[i]!).catch(() => undefined)));
    if (keepIn !== undefined) {
      const kept = join(keepIn, "kafka");
      const moved = await mkdir(keepIn, { recursive: true })
        .then(() => rename(root, kept))
        .then(
          () => true,
          (err: unknown) => {
            process.stderr.write(`netns-kafka: could not keep the brokers' data in ${kept}: ${String(err)}\n`);
            return false;
          },
        );
      if (moved) {
        process.stderr.write(`netns-kafka: the brokers' data dirs and server.logs are kept in ${kept}\n`);
        return;
      }
    }
    await rm(root, { recursive: true, force: true });
  };
  try {
    await mustRun("bash", [KAFKA_SH, "fetch"], { env: envs[0]!, stdio: ["ignore", "ignore", "inherit"] });
    const t0 = performance.now();
    await Promise.all(
      hosts.map(async (host, i) => {
        const { code, output } = await kafkaSh(host, "start", envs[i]!);
        if (code !== 0) {
          process.stderr.write(output);
          throw new Error(`Kafka node ${i + 1} on ${host.label} (${host.ip}) did not start: kafka.sh start exited with ${code}`);
        }
        process.stderr.write(`kafka node ${i + 1} on ${host.label} (${host.ip}) ready after ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
      }),
    );
  } catch (err) {
    await killAll();
    throw err;
  }
  const serverLog = (i: number): Promise<string> => readFile(join(root, `node-${i}`, "server.log"), "utf8");
  async function warnings(n = 40): Promise<string> {
    const out: string[] = [];
    for (const i of ids) {
      const text = await serverLog(i).catch((err: unknown) => `(no server.log: ${String(err)})`);
      const lines = text.split("\n").filter((l) => / (WARN|ERROR) /.test(l));
      out.push(`--- kafka node ${i}: last ${Math.min(n, lines.length)} of ${lines.length} WARN/ERROR lines`, ...lines.slice(-n));
    }
    return out.join("\n");
  }
  async function activeController(): Promise<number | undefined> {
    let latest: { at: string; id: number } | undefined;
    for (const i of ids) {
      const text = await serverLog(i).catch(() => "");
      for (const line of text.split("\n")) {
        if (!line.includes("Performing controller activation")) continue;
        // "[2026-12-05 05:37:31,933] WARN [QuorumController id=1] Performing controller activation..."
        const at = line.slice(1, line.indexOf("]"));
        if (latest === undefined || at > latest.at) latest = { at, id: i };
      }
    }
    return latest?.id;
  }
  return { brokers: hosts.map((h) => `${h.ip}:${KAFKA_CLIENT_PORT}`).join(","), ids, warnings, activeController, stop: killAll };
}
