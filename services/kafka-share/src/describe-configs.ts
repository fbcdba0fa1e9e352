/**
 * DescribeConfigs (API key 32): a broker's or a share group's settings as the cluster resolves them,
 * defaults included, for callers that check what they need against them (how many members a group
 * may have, how many records a share-partition may lock). Opens and closes its own connections.
 */
import { Cluster } from "./cluster.ts";
import { ErrorCode, KafkaProtocolError } from "./errors.ts";
import { describeConfigsApi, type DescribeConfigsResponse } from "./generated/describe-configs.ts";
import { call } from "./protocol/call.ts";
import type { AdminOptions } from "./admin.ts";

/** One setting as the broker reported it. */
export interface ConfigValue {
  /** null for a sensitive or unset value. */
  readonly value: string | null;
  /** The value is Kafka's built-in default (nothing in server.properties, no dynamic override). */
  readonly isDefault: boolean;
  readonly readOnly: boolean;
}

/** Settings by name. */
export type ConfigValues = ReadonlyMap<string, ConfigValue>;

const RESOURCE_BROKER = 4;
const RESOURCE_GROUP = 32;
/** ConfigSource DEFAULT_CONFIG (DescribeConfigsResponse). */
const SOURCE_DEFAULT = 5;

function newCluster(opts: AdminOptions): Cluster {
  return new Cluster({
    brokers: opts.brokers,
    clientId: opts.clientId ?? "kafka-share-admin",
    connectTimeoutMs: 5_000,
    requestTimeoutMs: 10_000,
    ...(opts.security ? { security: opts.security } : {}),
  });
}

async function describeAt(
  cluster: Cluster,
  nodeId: number,
  resources: Array<{ resourceType: number; resourceName: string; configurationKeys: string[] | null }>,
): Promise<DescribeConfigsResponse> {
  const range = (await cluster.apiVersions(nodeId)).get(describeConfigsApi.apiKey);
  // 35: UNSUPPORTED_VERSION.
  if (!range) throw new KafkaProtocolError("DescribeConfigs", 35, `broker ${nodeId} does not support it`);
  const version = Math.min(range.max, describeConfigsApi.maxVersion);
  const conn = await cluster.connection(nodeId, "coordinator");
  return call(conn, describeConfigsApi, version, { resources, includeSynonyms: false, includeDocumentation: false });
}

function valuesOf(result: DescribeConfigsResponse["results"][number]): ConfigValues {
  if (result.errorCode !== ErrorCode.NONE) {
    throw new KafkaProtocolError("DescribeConfigs", result.errorCode, `${result.resourceName}${result.errorMessage ? `: ${result.errorMessage}` : ""}`);
  }
  return new Map(result.configs.map((c) => [c.name, { value: c.value, isDefault: c.configSource === SOURCE_DEFAULT, readOnly: c.readOnly }] as const));
}

/**
 * Describes every broker's settings named in `names` (all of them when omitted), each asked of that
 * broker itself, as Kafka's admin client does: a broker's static settings are known to it alone.
 * Returns the settings per broker id, and so also how many brokers the cluster has.
 *
 * @example const byBroker = await describeBrokerConfigs({ brokers }, ["group.share.max.size"]);
 */
export async function describeBrokerConfigs(opts: AdminOptions, names?: readonly string[]): Promise<Map<number, ConfigValues>> {
  const cluster = newCluster(opts);
  try {
    await cluster.refreshMetadata([]);
    const out = new Map<number, ConfigValues>();
    for (const nodeId of cluster.brokerIds()) {
      const res = await describeAt(cluster, nodeId, [
        { resourceType: RESOURCE_BROKER, resourceName: String(nodeId), configurationKeys: names ? [...names] : null },
      ]);
      const result = res.results[0];
      if (!result) throw new KafkaProtocolError("DescribeConfigs", -1, "empty response");
      out.set(nodeId, valuesOf(result));
    }
    return out;
  } finally {
    await cluster.close();
  }
}

/**
 * Describes share groups' settings (`share.partition.max.record.locks`, ...) as the cluster resolves
 * them: a group's own value where one was set, else the broker's default for it. A group that does
 * not exist yet is described with the defaults. Any broker answers (group configs live in the
 * cluster's metadata).
 */
export async function describeGroupConfigs(opts: AdminOptions, groupIds: readonly string[], names?: readonly string[]): Promise<Map<string, ConfigValues>> {
  const cluster = newCluster(opts);
  try {
    await cluster.refreshMetadata([]);
    const nodeId = cluster.brokerIds()[0];
    if (nodeId === undefined) throw new KafkaProtocolError("Metadata", -1, "no broker in the metadata");
    const res = await describeAt(
      cluster,
      nodeId,
      groupIds.map((g) => ({ resourceType: RESOURCE_GROUP, resourceName: g, configurationKeys: names ? [...names] : null })),
    );
    return new Map(res.results.map((r) => [r.resourceName, valuesOf(r)]));
  } finally {
    await cluster.close();
  }
}
