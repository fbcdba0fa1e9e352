import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KAFKA_SH, mustRun, portIsFree, REPO_ROOT, run, step } from "./shell.ts";

/** A throwaway Kafka broker for one test or benchmark run. */
export interface ScratchBroker {
  readonly brokers: string;
  /** Stops the broker, keeping its data (for outage tests); `resume()` starts it again. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A port whose next port (the controller's) is free too, so several test runs (or a dev cluster
 * on 9092) can share the machine.
 */
export async function freeBrokerPort(): Promise<string> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + 2 * Math.floor(Math.random() * 4_000);
    if ((await portIsFree(port)) && (await portIsFree(port + 1))) return String(port);
  }
  throw new Error("no free port pair found for a scratch Kafka broker");
}

/**
 * Starts a broker on `port` (default: a free one) with a fresh data folder; `stop()` stops it and
 * removes the folder.
 */
export async function startScratchBroker(requested?: string): Promise<ScratchBroker> {
  const port = requested ?? (await freeBrokerPort());
  step(`scratch Kafka broker on 127.0.0.1:${port}`);
  const dataDir = await mkdtemp(join(tmpdir(), "shoal-kafka-"));
  const env = { ...process.env, KAFKA_PORT: port, KAFKA_DATA_DIR: dataDir };
  await mustRun("bash", [KAFKA_SH, "start"], { env });
  return {
    brokers: `127.0.0.1:${port}`,
    async pause() {
      await mustRun("bash", [KAFKA_SH, "stop"], { env });
    },
    async resume() {
      await mustRun("bash", [KAFKA_SH, "start"], { env });
    },
    async stop() {
      step(`stopping the scratch broker on ${port}`);
      await run("bash", [KAFKA_SH, "stop"], { env });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** One node of a scratch cluster: a broker and a KRaft controller voter in one JVM. */
export interface ClusterNode {
  /** Kafka's node id (broker id in topic metadata): index + 1. */
  readonly id: number;
  readonly port: number;
  /** `127.0.0.1:port`, the node's client listener. */
  readonly address: string;
}

/** A throwaway replicated Kafka cluster (every node a broker and a controller voter) on 127.0.0.1. */
export interface ScratchCluster {
  /** Bootstrap list of every node, e.g. `127.0.0.1:20000,127.0.0.1:20002,127.0.0.1:20004`. */
  readonly brokers: string;
  readonly nodes: readonly ClusterNode[];
  readonly replicationFactor: number;
  readonly minInsyncReplicas: number;
  /** SIGKILLs node `i` (an index into `nodes`): a crash, no controlled shutdown. Its data is kept. */
  kill(i: number): Promise<void>;
  /** Starts node `i` again on its data (log recovery after a kill) and waits until it serves. */
  restart(i: number): Promise<void>;
  /** Kills every node (the data is thrown away, so no clean shutdown is needed) and removes the data. */
  stop(): Promise<void>;
}

export interface ScratchClusterOptions {
  /** JVM heap per node (`KAFKA_HEAP`), default 384m: three nodes fit a small CI machine. */
  readonly heap?: string;
}

/** `2 * n` consecutive free ports: node i listens on base + 2i, its controller on base + 2i + 1. */
async function freePortBlock(n: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + 2 * Math.floor(Math.random() * 3_990);
    let free = true;
    for (let p = base; p < base + 2 * n && free; p++) free = await portIsFree(p);
    if (free) return base;
  }
  throw new Error(`no ${2 * n} consecutive free ports for a scratch Kafka cluster`);
}

/** A Kafka cluster id: 16 random bytes, URL-safe base64 (never with a leading '-', which tools read as a flag). */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString("base64url");
    if (!id.startsWith("-")) return id;
  }
}

/** Runs kafka.sh with its output kept; resolves with the exit code and the output. */
function kafkaSh(command: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [KAFKA_SH, command], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

/**
 * Starts an `n`-node KRaft cluster (default 3) on free ports with fresh data folders: every node
 * is a broker and a controller voter, topics get replication factor min(n, 3) and
 * min.insync.replicas one less (3 nodes: RF 3, min ISR 2, internal topics too). The nodes are
 * launched together (the quorum and the replicated offsets topic need a majority, then all of
 * them) and each is waited for. `stop()` kills them and removes the data.
 */
export async function startScratchCluster(n = 3, opts: ScratchClusterOptions = {}): Promise<ScratchCluster> {
  if (!Number.isInteger(n) || n < 1 || n > 9) throw new RangeError(`startScratchCluster: 1..9 nodes, got ${n}`);
  const base = await freePortBlock(n);
  const nodes: ClusterNode[] = Array.from({ length: n }, (_, i) => ({ id: i + 1, port: base + 2 * i, address: `127.0.0.1:${base + 2 * i}` }));
  const brokers = nodes.map((node) => node.address).join(",");
  const replicationFactor = Math.min(n, 3);
  const minInsyncReplicas = Math.max(1, replicationFactor - 1);
  step(`scratch Kafka cluster: ${n} nodes on ${brokers} (replication factor ${replicationFactor}, min ISR ${minInsyncReplicas})`);
  const root = await mkdtemp(join(tmpdir(), "shoal-kafka-cluster-"));
  const quorum = nodes.map((node) => `${node.id}@127.0.0.1:${node.port + 1}`).join(",");
  const id = clusterId();
  const envs = nodes.map((node) => ({
    ...process.env,
    KAFKA_PORT: String(node.port),
    KAFKA_CONTROLLER_PORT: String(node.port + 1),
    KAFKA_DATA_DIR: join(root, `node-${node.id}`),
    KAFKA_NODE_ID: String(node.id),
    KAFKA_CONTROLLER_QUORUM: quorum,
    KAFKA_CLUSTER_ID: id,
    KAFKA_REPLICATION_FACTOR: String(replicationFactor),
    KAFKA_MIN_ISR: String(minInsyncReplicas),
    KAFKA_HEAP: opts.heap ?? "384m",
  }));
  const envOf = (i: number): NodeJS.ProcessEnv => {
    const env = envs[i];
    if (!env) throw new RangeError(`no node ${i} (the cluster has ${n})`);
    return env;
  };
  const killAll = (): Promise<unknown> => Promise.all(envs.map((env) => kafkaSh("kill", env)));

  try {
    // Once, before the nodes start side by side (kafka.sh would serialise the fetch anyway).
    await mustRun("bash", [KAFKA_SH, "fetch"], { env: envOf(0) });
    const t0 = performance.now();
    process.stderr.write(`launching ${n} nodes, waiting until each serves (cluster id ${id}, data ${root})\n`);
    await Promise.all(
      nodes.map(async (node, i) => {
        const { code, output } = await kafkaSh("start", envOf(i));
        if (code !== 0) {
          process.stderr.write(output);
          throw new Error(`node ${node.id} (${node.address}) did not start: kafka.sh start exited with ${code}`);
        }
        process.stderr.write(`node ${node.id} on ${node.address} ready after ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
      }),
    );
  } catch (err) {
    await killAll();
    await rm(root, { recursive: true, force: true });
    throw err;
  }

  return {
    brokers,
    nodes,
    replicationFactor,
    minInsyncReplicas,
    async kill(i) {
      const { code, output } = await kafkaSh("kill", envOf(i));
      if (code !== 0) throw new Error(`kafka.sh kill (node ${i + 1}) exited with ${code}:\n${output}`);
    },
    async restart(i) {
      const { code, output } = await kafkaSh("start", envOf(i));
      if (code !== 0) throw new Error(`kafka.sh start (node ${i + 1}) exited with ${code}:\n${output}`);
    },
    async stop() {
      step(`stopping the scratch Kafka cluster on ${brokers}`);
      await killAll();
      await rm(root, { recursive: true, force: true });
    },
  };
}
