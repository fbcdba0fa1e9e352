/**
 * What the share consumer knows about the cluster: broker addresses, topic ids and partition
 * leaders, the group coordinator, and each broker's API versions; plus one connection per
 * (broker, purpose). Heartbeats get their own connection because a broker answers one request per
 * connection at a time: a ShareFetch long poll on the same socket would hold a heartbeat back for
 * up to its MaxWaitMs.
 */
import { apiVersionsV4, Connection, findCoordinatorV6, metadataV12 } from "@platformatic/kafka";
import { ErrorCode, KafkaProtocolError, KafkaSecurityError } from "./errors.ts";
import { connectionSecurity, securityFailure, type KafkaSecurityOptions } from "./security.ts";

/** Topic-partition leadership as the last Metadata response gave it. */
export interface TopicInfo {
  readonly name: string;
  readonly id: string;
  /** partition index → leader node id (-1 while there is none) */
  readonly leaders: ReadonlyMap<number, number>;
}

export type ConnectionPurpose = "coordinator" | "fetch";

/** Request timeout of connections that never long-poll (Metadata, FindCoordinator, heartbeats). */
const CONTROL_REQUEST_TIMEOUT_MS = 5_000;

export interface ClusterOptions {
  readonly brokers: readonly string[];
  readonly clientId: string;
  readonly connectTimeoutMs: number;
  readonly requestTimeoutMs: number;
  /** TLS and SASL for every connection; none: plaintext, unauthenticated. */
  readonly security?: KafkaSecurityOptions;
}

/** The version range a broker accepts for one API key. */
export interface VersionRange {
  readonly min: number;
  readonly max: number;
}

export class Cluster {
  readonly #opts: ClusterOptions;
  readonly #addresses = new Map<number, { host: string; port: number }>();
  readonly #connections = new Map<string, Promise<Connection>>();
  readonly #versions = new Map<number, Promise<Map<number, VersionRange>>>();
  readonly #topicsByName = new Map<string, TopicInfo>();
  readonly #topicsById = new Map<string, TopicInfo>();
  #bootstrapIndex = 0;
  /** The node whose bootstrap connection last opened. */
  #answered: number | undefined;

  constructor(opts: ClusterOptions) {
    this.#opts = opts;
  }

  topicByName(name: string): TopicInfo | undefined {
    return this.#topicsByName.get(name);
  }

  /** Ids of the brokers learnt so far (from Metadata and FindCoordinator answers), ascending. */
  brokerIds(): number[] {
    return [...this.#addresses.keys()].sort((a, b) => a - b);
  }

  topicById(id: string): TopicInfo | undefined {
    return this.#topicsById.get(id);
  }

  /**
   * Refreshes topic ids and partition leaders (and broker addresses) for `topics`. Returns the
   * topics the broker could not describe (unknown, or no leader yet); their last figures are kept.
   */
  async refreshMetadata(topics: readonly string[]): Promise<Set<string>> {
    const conn = await this.#bootstrap();
    let res: metadataV12.MetadataResponse;
    try {
      res = await metadataV12.api.async(conn, [...topics], false, false);
    } catch (err) {
      // platformatic throws on a non-zero code but attaches the decoded response: a missing topic
      // must not hide the leaders of the others.
      const response = (err as { response?: unknown }).response as typeof res | undefined;
      if (!response) {
        this.#unanswered(conn);
        throw err;
      }
      res = response;
    }
    for (const b of res.brokers) this.#addresses.set(b.nodeId, { host: b.host, port: b.port });
    const missing = new Set(topics);
    for (const t of res.topics) {
      if (t.errorCode !== ErrorCode.NONE || !t.name) continue;
      missing.delete(t.name);
      const info: TopicInfo = {
        name: t.name,
        id: t.topicId,
        leaders: new Map(t.partitions.map((p) => [p.partitionIndex, p.errorCode === ErrorCode.NONE ? p.leaderId : -1])),
      };
      const old = this.#topicsByName.get(t.name);
      if (old && old.id !== info.id) this.#topicsById.delete(old.id); // deleted and re-created
      this.#topicsByName.set(t.name, info);
      this.#topicsById.set(info.id, info);
    }
    return missing;
  }

  /** Asks any broker which node coordinates `groupId` (share groups use the group coordinator). */
  async findCoordinator(groupId: string): Promise<number> {
    const conn = await this.#bootstrap();
    let res: findCoordinatorV6.FindCoordinatorResponse;
    try {
      res = await findCoordinatorV6.api.async(conn, 0, [groupId]);
    } catch (err) {
      if (!(err as { response?: unknown }).response) this.#unanswered(conn);
      throw err;
    }
    const c = res.coordinators[0];
    if (!c) throw new KafkaProtocolError("FindCoordinator", -1, "empty response");
    if (c.errorCode !== ErrorCode.NONE) throw new KafkaProtocolError("FindCoordinator", c.errorCode, c.errorMessage);
    this.#addresses.set(c.nodeId, { host: c.host, port: c.port });
    return c.nodeId;
  }

  /**
   * Asks any broker which node coordinates each of `groupIds`, in one FindCoordinator request: a
   * node id per group, or the error the broker gave for it.
   */
  async findCoordinators(groupIds: readonly string[]): Promise<Map<string, number | KafkaProtocolError>> {
    const conn = await this.#bootstrap();
    let res: findCoordinatorV6.FindCoordinatorResponse;
    try {
      res = await findCoordinatorV6.api.async(conn, 0, [...groupIds]);
    } catch (err) {
      // As for Metadata: one group's error must not hide the others' coordinators.
      const response = (err as { response?: unknown }).response as typeof res | undefined;
      if (!response) throw err;
      res = response;
    }
    const out = new Map<string, number | KafkaProtocolError>();
    for (const c of res.coordinators) {
      if (c.errorCode !== ErrorCode.NONE) {
        out.set(c.key, new KafkaProtocolError("FindCoordinator", c.errorCode, c.errorMessage));
        continue;
      }
      this.#addresses.set(c.nodeId, { host: c.host, port: c.port });
      out.set(c.key, c.nodeId);
    }
    return out;
  }

  /** Learns a broker's address from a response (NodeEndpoints of a NOT_LEADER_OR_FOLLOWER reply). */
  learnAddress(nodeId: number, host: string, port: number): void {
    this.#addresses.set(nodeId, { host, port });
  }

  /** The connection to `nodeId` for `purpose`, opened on first use and reopened once closed. */
  async connection(nodeId: number, purpose: ConnectionPurpose): Promise<Connection> {
    const key = `${purpose}:${nodeId}`;
    for (;;) {
      const pending = this.#connections.get(key);
      if (!pending) break;
      const conn = await pending.catch(() => undefined);
      if (conn?.isConnected()) return conn;
      // Closed under us (broker restart, idle close): forget it unless someone already replaced it.
      if (this.#connections.get(key) !== pending) continue;
      this.#connections.delete(key);
      this.#versions.delete(nodeId);
      break;
    }
    const address = this.#addresses.get(nodeId);
    if (!address) throw new Error(`no address known for broker ${nodeId}`);
    const opening = this.#open(address.host, address.port, purpose);
    this.#connections.set(key, opening);
    opening.catch(() => {
      if (this.#connections.get(key) === opening) this.#connections.delete(key);
    });
    return opening;
  }

  /** Closes and forgets a connection after a network error, so the next use reconnects. */
  drop(nodeId: number, purpose: ConnectionPurpose): void {
    const key = `${purpose}:${nodeId}`;
    const pending = this.#connections.get(key);
    this.#connections.delete(key);
    this.#versions.delete(nodeId);
    pending?.then((c) => c.close()).catch(() => {});
  }

  /**
   * Closes a connection at once, failing its in-flight requests (a waiting fetch cut short); the
   * broker ends the share sessions on it and releases what they held.
   */
  abort(nodeId: number, purpose: ConnectionPurpose): void {
    const key = `${purpose}:${nodeId}`;
    const pending = this.#connections.get(key);
    this.#connections.delete(key);
    this.#versions.delete(nodeId);
    pending?.then((c) => c.socket?.destroy()).catch(() => {});
  }

  /** The broker's supported version range per API key (ApiVersions, cached per node). */
  apiVersions(nodeId: number): Promise<Map<number, VersionRange>> {
    let pending = this.#versions.get(nodeId);
    if (!pending) {
      pending = this.connection(nodeId, "fetch").then(async (conn) => {
        const res = await apiVersionsV4.api.async(conn, "shoal-kafka-share", "0.1.0");
        return new Map(res.apiKeys.map((k) => [k.apiKey, { min: k.minVersion, max: k.maxVersion }]));
      });
      pending.catch(() => this.#versions.delete(nodeId));
      this.#versions.set(nodeId, pending);
    }
    return pending;
  }

  /**
   * The non-retriable security failure in `err`, if any: a connection's own (already typed), or
   * one a request ran into (a plaintext client answered in TLS by the bootstrap broker).
   */
  securityFailure(err: unknown): KafkaSecurityError | undefined {
    return err instanceof KafkaSecurityError ? err : securityFailure(err, this.#opts.brokers.join(","));
  }

  /** Closes every connection. `hard` skips waiting for in-flight requests (a crash, for tests). */
  async close(hard = false): Promise<void> {
    const all = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(
      all.map(async (p) => {
        const c = await p.catch(() => undefined);
        if (!c) return;
        if (hard) c.socket?.destroy();
        await c.close().catch(() => {});
      }),
    );
  }

  /**
   * Fetch connections carry ShareFetch long polls (the caller's maxWaitMs): they get the full
   * request timeout. Metadata, FindCoordinator and heartbeats are answered at once by a live
   * broker: a shorter bound finds a silent one sooner.
   */
  #open(host: string, port: number, purpose: ConnectionPurpose | "bootstrap"): Promise<Connection> {
    const requestTimeoutMs = purpose === "fetch" ? this.#opts.requestTimeoutMs : Math.min(this.#opts.requestTimeoutMs, CONTROL_REQUEST_TIMEOUT_MS);
    return openConnection(host, port, { ...this.#opts, requestTimeoutMs });
  }

  /** A bootstrap connection's request went unanswered: close it, and let the next ask another broker. */
  #unanswered(conn: Connection): void {
    for (const [key, pending] of this.#connections) {
      void pending.then(
        (c) => {
          if (c !== conn || this.#connections.get(key) !== pending) return;
          this.#connections.delete(key);
          if (key === `coordinator:${this.#answered}`) this.#answered = undefined;
          c.socket?.destroy();
        },
        () => undefined,
      );
    }
  }

  /** Any reachable broker, for Metadata and FindCoordinator: the bootstrap list, round robin. */
  async #bootstrap(): Promise<Connection> {
    // The broker that answered last goes first: a silent one costs a connect timeout per try.
    const known = [...this.#addresses.keys()].sort((a, b) => Number(b === this.#answered) - Number(a === this.#answered));
    if (known.length > 0) {
      for (const nodeId of known) {
        try {
          const conn = await this.connection(nodeId, "coordinator");
          this.#answered = nodeId;
          return conn;
        } catch (err) {
          this.drop(nodeId, "coordinator");
          if (this.#answered === nodeId) this.#answered = undefined;
          if (err instanceof KafkaSecurityError) throw err;
        }
      }
    }
    let lastError: unknown;
    for (let i = 0; i < this.#opts.brokers.length; i++) {
      const spec = this.#opts.brokers[(this.#bootstrapIndex + i) % this.#opts.brokers.length]!;
      const [host, port] = splitHostPort(spec);
      const key = `bootstrap:${spec}`;
      let pending = this.#connections.get(key);
      if (!pending) {
        pending = this.#open(host, port, "bootstrap");
        this.#connections.set(key, pending);
      }
      try {
        const conn = await pending;
        if (conn.isConnected()) return conn;
        throw new Error(`bootstrap connection to ${spec} is closed`);
      } catch (err) {
        this.#connections.delete(key);
        // Another bootstrap broker would refuse the same credentials: say so now.
        if (err instanceof KafkaSecurityError) throw err;
        lastError = err;
        this.#bootstrapIndex++;
      }
    }
    throw new Error(`no bootstrap broker reachable (${this.#opts.brokers.join(", ")})`, { cause: lastError });
  }
}

/** Opens one connection to `host:port` with the cluster's timeouts, TLS and SASL. */
export function openConnection(host: string, port: number, opts: Omit<ClusterOptions, "brokers">): Promise<Connection> {
  const conn = new Connection(opts.clientId, {
    connectTimeout: opts.connectTimeoutMs,
    requestTimeout: opts.requestTimeoutMs,
    ...connectionSecurity(opts.security),
  });
  // A Connection emits 'error' on socket failures; callers see them as rejected requests.
  conn.on("error", () => {});
  // TLS and SASL run inside connect(): a refused password or certificate rejects it, typed.
  return conn.connect(host, port)!.then(
    () => conn,
    (err: unknown) => {
      throw securityFailure(err, `${host}:${port}`) ?? err;
    },
  );
}

export function splitHostPort(spec: string): [string, number] {
  const at = spec.lastIndexOf(":");
  const port = Number(spec.slice(at + 1));
  if (at <= 0 || !Number.isInteger(port)) throw new RangeError(`broker address must be host:port, got '${spec}'`);
  return [spec.slice(0, at), port];
}
