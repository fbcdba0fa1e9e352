/**
 * The share group's coordinator, for the `move-coordinator` fault (issue #49): found with
 * FindCoordinator, and moved without stopping a broker by moving the leadership of the
 * `__consumer_offsets` partition that hosts the group (share groups live in the group coordinator,
 * keyed like consumer groups): a reassignment that puts another in-sync replica first, then a
 * preferred-leader election (Kafka's LeaderElectionCommand on the brokers' own jars, since neither
 * client library sends ElectLeaders). The replica set never changes, so no data moves.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { alterPartitionReassignmentsV0, Connection, findCoordinatorV6, metadataV12 } from "@platformatic/kafka";

const exec = promisify(execFile);

/** The topic whose partition leaders are the group coordinators. */
export const OFFSETS_TOPIC = "__consumer_offsets";

/** Java's `String.hashCode()` (UTF-16 code units), which Kafka hashes group ids with. */
export function javaStringHash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}

/** The `__consumer_offsets` partition of a group: Kafka's `Utils.abs(groupId.hashCode()) % partitions`. */
export function offsetsPartitionOf(groupId: string, partitions: number): number {
  const h = javaStringHash(groupId);
  return (h === -2_147_483_648 ? 0 : Math.abs(h)) % partitions;
}

/** Where a group's coordinator is: its offsets partition, that partition's replicas (preferred first) and in-sync set, and the coordinator. */
export interface CoordinatorPlace {
  readonly groupId: string;
  readonly partition: number;
  readonly replicas: readonly number[];
  readonly isr: readonly number[];
  readonly leader: number;
  /** What FindCoordinator answers (the partition's leader, once it has loaded the group). */
  readonly coordinator: number;
}

async function withConnection<T>(brokers: string, fn: (conn: Connection) => Promise<T>): Promise<T> {
  let last: unknown;
  for (const b of brokers.split(",")) {
    const [host, port] = b.split(":");
    const conn = new Connection("shoal-chaos-coordinator", { connectTimeout: 3_000, requestTimeout: 10_000 });
    try {
      await conn.connect(host!, Number(port));
    } catch (err) {
      last = err;
      await conn.close().catch(() => undefined);
      continue;
    }
    try {
      return await fn(conn);
    } finally {
      await conn.close().catch(() => undefined);
    }
  }
  throw new Error(`no broker of ${brokers} answered: ${last instanceof Error ? last.message : String(last)}`);
}

/**
 * The group's coordinator and its offsets partition, as the brokers say now.
 * @throws Error when they disagree (the partition's leader is not the coordinator) or a request fails
 */
export function findCoordinator(brokers: string, groupId: string): Promise<CoordinatorPlace> {
  return withConnection(brokers, async (conn) => {
    const found = (await findCoordinatorV6.api.async(conn, 0, [groupId])).coordinators[0];
    if (found === undefined || found.errorCode !== 0) throw new Error(`FindCoordinator(${groupId}): error ${found?.errorCode} ${found?.errorMessage ?? ""}`);
    const topic = (await metadataV12.api.async(conn, [OFFSETS_TOPIC], false, false)).topics[0];
    if (topic === undefined || topic.errorCode !== 0 || topic.partitions.length === 0) throw new Error(`no metadata for ${OFFSETS_TOPIC}`);
    const partition = offsetsPartitionOf(groupId, topic.partitions.length);
    const p = topic.partitions.find((x) => x.partitionIndex === partition);
    if (p === undefined) throw new Error(`${OFFSETS_TOPIC}-${partition} missing from the metadata`);
    return { groupId, partition, replicas: p.replicaNodes, isr: p.isrNodes, leader: p.leaderId, coordinator: found.nodeId };
  });
}

/** Sets the replica order of the group's offsets partition (the same replicas: nothing is copied). */
function reorder(brokers: string, partition: number, replicas: readonly number[]): Promise<void> {
  return withConnection(brokers, async (conn) => {
    const res = await alterPartitionReassignmentsV0.api.async(conn, 10_000, false, [
      { name: OFFSETS_TOPIC, partitions: [{ partitionIndex: partition, replicas: [...replicas] }] },
    ]);
    const e = res.errorCode !== 0 ? res : res.responses[0]?.partitions[0];
    if (e !== undefined && e.errorCode !== 0) throw new Error(`AlterPartitionReassignments: error ${e.errorCode} ${e.errorMessage ?? ""}`);
  });
}

/** Kafka's classpath, read from a running broker's command line (kafka.sh's `-cp <libs>/*`). */
export async function kafkaClasspath(brokerPid: number): Promise<string> {
  const argv = (await readFile(`/proc/${brokerPid}/cmdline`, "utf8")).split("\0");
  const cp = argv[argv.indexOf("-cp") + 1];
  if (argv.indexOf("-cp") < 0 || cp === undefined) throw new Error(`broker pid ${brokerPid} has no -cp on its command line`);
  return cp;
}

/** A preferred-leader election of one offsets partition (LeaderElectionCommand, kafka.sh's tool flags); resolves with its output. */
async function electPreferred(brokers: string, classpath: string, partition: number): Promise<string> {
  const args = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", classpath];
  const tool = ["org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", brokers, "--election-type", "PREFERRED"];
  const lastLines = (text: string): string => text.trim().split("\n").slice(-3).join(" / ");
  return exec("java", [...args, ...tool, "--topic", OFFSETS_TOPIC, "--partition", String(partition)], { timeout: 60_000 }).then(
    (r) => lastLines(`${r.stdout}${r.stderr}`),
    (err: unknown) => {
      const out = err as { stdout?: string; stderr?: string; message?: string };
      throw new Error(`LeaderElectionCommand failed: ${lastLines(out.stderr || out.stdout || out.message || "")}`);
    },
  );
}

/** Seconds between preferred elections while the leader has not moved (an election before the new order landed is a no-op). */
const ELECTION_RETRY_MS = 5_000;

/**
 * Moves the group's coordinator to broker `to` (an in-sync replica of its offsets partition):
 * `to` first in the replica order, then a preferred election; resolves when FindCoordinator names
 * `to`.
 * @throws Error when `to` is not in sync, or the coordinator is not `to` within `timeoutMs`
 */
export async function moveCoordinator(brokers: string, classpath: string, place: CoordinatorPlace, to: number, timeoutMs = 30_000): Promise<CoordinatorPlace> {
  if (!place.isr.includes(to)) throw new Error(`broker ${to} is not in sync on ${OFFSETS_TOPIC}-${place.partition} (isr ${place.isr.join(",")})`);
  await reorder(brokers, place.partition, [to, ...place.replicas.filter((r) => r !== to)]);
  return awaitCoordinator(brokers, classpath, place, to, timeoutMs);
}

/** Puts the offsets partition's replica order back to `place.replicas` and elects its preferred leader. */
export async function restoreCoordinator(brokers: string, classpath: string, place: CoordinatorPlace, timeoutMs = 30_000): Promise<CoordinatorPlace> {
  await reorder(brokers, place.partition, place.replicas);
  return awaitCoordinator(brokers, classpath, place, place.replicas[0]!, timeoutMs);
}

/** Elects the preferred leader (once the reorder has landed) and waits for FindCoordinator to name `to`. */
async function awaitCoordinator(brokers: string, classpath: string, place: CoordinatorPlace, to: number, timeoutMs: number): Promise<CoordinatorPlace> {
  const until = performance.now() + timeoutMs;
  let electedAt = Number.NEGATIVE_INFINITY;
  let now: CoordinatorPlace | undefined;
  let problem = "";
  while (performance.now() < until) {
    try {
      now = await findCoordinator(brokers, place.groupId);
      if (now.coordinator === to && now.leader === to) return now;
      if (now.replicas[0] === to && now.leader !== to && performance.now() - electedAt > ELECTION_RETRY_MS) {
        problem = `election said: ${await electPreferred(brokers, classpath, place.partition)}`;
        electedAt = performance.now();
      }
    } catch (err) {
      // COORDINATOR_LOAD_IN_PROGRESS and the like while leadership changes: ask again.
      problem = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(
    `the coordinator did not move to broker ${to} within ${timeoutMs} ms (now: leader ${now?.leader}, coordinator ${now?.coordinator}, replicas ${now?.replicas.join(",")}${problem ? `; last error: ${problem}` : ""})`,
  );
}
