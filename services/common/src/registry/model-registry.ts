import { createHash } from "node:crypto";
import type { Kafka, KafkaMessage, Message, Producer } from "kafkajs";
import type { Catalog, CatalogModel } from "../catalog.ts";
import type { EnvReader } from "../env-config.ts";
import type { Logger } from "../logger.ts";
import { SIGNATURE_HEADER, statusSignedBytes, type RecordSigner } from "../record-signer.ts";
import { createResilientConsumer, SOLO_GROUP_CONSUMER } from "../resilient-consumer.ts";
import { COMPACTED_STATE_CONFIG, ensureTopics, type TopicSpec } from "../topics.ts";
import { LiveModels } from "./live-models.ts";
import { createSourceResolver, type ModelSourceResolver } from "./model-source.ts";
import { embedderOf, modelKey, modelRecordValue, RegistryState, seedKey, seedRecordValue } from "./registry-state.ts";
import { materializeModel, recordOfCatalogModel } from "./registry-models.ts";

/** The model registry's compacted topic (one partition): keys `model/<id>`, `alias/<name>`, `seed/<pool>`. */
export const REGISTRY_TOPIC = "shoal.registry";

/** A registry topic: compacted; a tombstone is kept a day, so a reader that was away that long still sees a removal. */
export function registryTopicSpec(topic: string = REGISTRY_TOPIC): TopicSpec {
  return {
    topic,
    partitions: 1,
    config: COMPACTED_STATE_CONFIG,
  };
}

export interface ModelRegistryOptions {
  /** The catalog YAML: its pools, and the models that seed a pool the registry does not own yet. */
  readonly catalog: Catalog;
  /** Names this process's consumer group and the seeds it writes. */
  readonly instanceId: string;
  /** Resolves a record's source on this host (default: folders only). */
  readonly resolver?: ModelSourceResolver;
  /** With cluster keys: registry records are signed over key and value, and unsigned ones ignored. */
  readonly signer?: RecordSigner;
  /** A worker's: a removed model stays reachable this long, for the jobs accepted before its removal. */
  readonly retiredGraceMs?: number;
  /** The registry topic (SHOAL_REGISTRY_TOPIC; default `shoal.registry`): one per Shoal cluster sharing a Kafka cluster. */
  readonly topic?: string;
  /**
   * A worker's huggingface_hub cache: `hf:` models are served from their records' manifests and
   * their files fetched on first need (see materializeModel). Unset: fetched when applied.
   */
  readonly hubCacheDir?: string;
  /** How long start() may take to read the topic to its end (default 30 s). */
  readonly catchUpMs?: number;
}

/** The registry as one process follows it: a live catalog and the state behind it. */
export interface ModelRegistry {
  /** The YAML's pools and the registry's models, kept current in place (see LiveModels). */
  readonly catalog: Catalog;
  readonly state: RegistryState;
  /** Creates the topic, reads it to its end, seeds the pools it does not own yet, and follows it. */
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Writes one record (null: a tombstone) and resolves once this process has applied it. */
  write(key: string, value: Uint8Array | null): Promise<void>;
  /**
   * The model served under `id` (at `revision`, when not empty) once it is, else undefined after
   * `timeoutMs`. A `revision` this process has seen replaced or removed (LiveModels.wasSuperseded)
   * is behind the registry, not ahead of it: the model served now answers at once.
   */
  waitFor(id: string, revision: string, timeoutMs: number): Promise<CatalogModel | undefined>;
}

const WRITE_TIMEOUT_MS = 10_000;

/** Follows the registry topic from its start into a live catalog (see docs/models.md, "Live registry"). */
export function createModelRegistry(kafka: Kafka, logger: Logger, opts: ModelRegistryOptions): ModelRegistry {
  const log = logger.child({ component: "model-registry" });
  const topic = opts.topic ?? REGISTRY_TOPIC;
  const resolver = opts.resolver ?? createSourceResolver();
  const state = new RegistryState();
  const models = new LiveModels();
  models.configure((name) => state.resolve(name), opts.retiredGraceMs ?? 0);
  const catalog: Catalog = Object.freeze({ path: opts.catalog.path, pools: opts.catalog.pools, models });
  const producer: Producer = kafka.producer({ allowAutoTopicCreation: false });
  let applied = -1n;
  const listeners = new Set<() => void>();
  const notify = (): void => {
    for (const l of [...listeners]) l();
  };
  // Composites whose embedder is not served (yet): retried after every model change.
  const pending = new Map<string, string>();

  async function materialize(id: string): Promise<void> {
    const record = state.models.get(id);
    if (record === undefined) {
      pending.delete(id);
      return models.retire(id);
    }
    if (!catalog.pools.has(record.pool)) {
      // Another catalog's pool (another cluster sharing the broker): not served here.
      log.debug({ model: id, pool: record.pool }, "registry model of a pool this catalog does not have: ignored");
      return models.retire(id);
    }
    try {
      const model = await materializeModel(record, resolver, (m) => models.served(m), opts.hubCacheDir === undefined ? {} : { hubCacheDir: opts.hubCacheDir });
      // Still the same record once its folder was read: a later record may have replaced it meanwhile.
      if (state.models.get(id) !== record) return;
      pending.delete(id);
      models.serve(model);
      log.info({ model: id, pool: record.pool, source: record.source, revision: record.revision }, "registry model served");
    } catch (err) {
      models.retire(id);
      if (embedderOf(record) !== "") pending.set(id, embedderOf(record));
      else log.error({ model: id, source: record.source, err }, "registry model cannot be served on this host");
    }
  }

  async function accept(message: KafkaMessage): Promise<void> {
    const offset = BigInt(message.offset);
    // A replacement consumer reads the topic from its start again: what was applied stays applied.
    if (offset <= applied) return;
    try {
      const key = message.key?.toString("utf8") ?? "";
      if (opts.signer !== undefined && !opts.signer.verify("registry", statusSignedBytes(key, message.value), message.headers?.[SIGNATURE_HEADER])) {
        log.warn({ offset: message.offset }, "registry record without a valid signature (SHOAL_CLUSTER_KEYS): ignored");
        return;
      }
      const change = state.apply(key, message.value);
      if (change.kind !== "model") return;
      await materialize(change.id);
      for (const [id, embedder] of [...pending]) if (embedder === change.id) await materialize(id);
    } catch (err) {
      log.warn({ err, offset: message.offset }, "registry record not applied");
    } finally {
      applied = offset;
      notify();
    }
  }

  const consumer = createResilientConsumer(kafka, logger, {
    component: "model-registry",
    consumerConfig: { groupId: `shoal-registry-${opts.instanceId}`, ...SOLO_GROUP_CONSUMER, allowAutoTopicCreation: false },
    subscribe: (c) => c.subscribe({ topic, fromBeginning: true }),
    // Never committed: every start reads the compacted topic from its beginning.
    run: { autoCommit: false, eachMessage: ({ message }) => accept(message) },
    deleteGroupOnStop: true,
  });

  /** Resolves once the records up to `offset` are applied; false after `timeoutMs`. */
  function appliedUpTo(offset: bigint, timeoutMs: number): Promise<boolean> {
    if (applied >= offset) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = (): void => {
        if (applied < offset) return;
        done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        listeners.delete(check);
        resolve(ok);
      };
      listeners.add(check);
    });
  }

  async function lastOffset(): Promise<bigint> {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await ensureTopics(admin, [registryTopicSpec(topic)]);
      const [end] = await admin.fetchTopicOffsets(topic);
      return BigInt(end?.high ?? "0") - 1n;
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  function signed(key: string, value: Uint8Array | null): Message {
    const buf = value === null ? null : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    const sig = opts.signer?.sign("registry", statusSignedBytes(key, buf));
    return { key, value: buf, ...(sig === undefined ? {} : { headers: { [SIGNATURE_HEADER]: sig } }) };
  }

  /** Writes `messages` in one request (one batch on the one partition) and waits until they are applied here. */
  async function send(messages: Message[]): Promise<void> {
    const [meta] = await producer.send({ topic, acks: -1, messages });
    const last = BigInt(meta?.baseOffset ?? "-1") + BigInt(messages.length - 1);
    if (!(await appliedUpTo(last, WRITE_TIMEOUT_MS))) throw new Error(`registry record not read back within ${WRITE_TIMEOUT_MS} ms`);
  }

  /**
   * Writes each pool's YAML models when the YAML's declaration of the pool differs from the last
   * seed's (none yet, or the file changed), behind a new seed marker, in one request: a single batch
   * on the one partition, so a reader sees all of a seed or none. Models the last seed wrote that
   * the YAML no longer declares are removed, unless an alias or a composite still points at them;
   * models added by AddModel are left alone. Two processes that start at once with the same YAML
   * write the same records; the later batch wins key by key.
   */
  async function seed(): Promise<void> {
    const now = Date.now();
    const messages: Message[] = [];
    const seeded: string[] = [];
    for (const pool of catalog.pools.keys()) {
      const yaml = [...opts.catalog.models.values()].filter((m) => m.pool === pool);
      // Embedders before the composites that score through them.
      const ordered = [...yaml.filter((x) => x.composite === undefined), ...yaml.filter((x) => x.composite !== undefined)];
      const digest = declarationDigest(ordered);
      if (state.seeded.get(pool)?.digest === digest) continue;
      const ids = ordered.map((m) => m.id);
      for (const m of ordered) {
        const revision = m.composite === undefined ? (m.revision ?? (await resolver(m.source ?? m.spec.dir, {})).revision) : "";
        messages.push(signed(modelKey(m.id), modelRecordValue(recordOfCatalogModel(m, revision, now))));
      }
      for (const gone of state.seeded.get(pool)?.models ?? []) {
        if (ids.includes(gone) || !state.models.has(gone) || state.aliasesOf(gone).length > 0 || referencedByComposite(gone)) continue;
        messages.push(signed(modelKey(gone), null));
      }
      messages.push(signed(seedKey(pool), seedRecordValue(pool, opts.instanceId, now, digest, ids)));
      seeded.push(pool);
    }
    if (messages.length === 0) return;
    await send(messages);
    log.info({ pools: seeded, records: messages.length }, "registry seeded from the catalog YAML (its declaration of these pools changed)");
  }

  /** Whether a served composite scores through model `id`. */
  function referencedByComposite(id: string): boolean {
    return [...state.models.values()].some((r) => r.compositeJson !== "" && embedderOf(r) === id);
  }

  return {
    catalog,
    state,
    async start() {
      const deadline = Date.now() + (opts.catchUpMs ?? 30_000);
      const last = await lastOffset();
      await producer.connect();
      await consumer.start();
      if (!(await appliedUpTo(last, Math.max(0, deadline - Date.now())))) throw new Error(`model registry: not read to its end (offset ${last}) in time`);
      await seed();
      log.info({ models: models.size, aliases: state.aliases.size, offset: String(applied) }, "model registry read");
    },
    async stop() {
      await consumer.stop();
      await producer.disconnect().catch(() => undefined);
    },
    async write(key, value) {
      await send([signed(key, value)]);
    },
    waitFor(id, revision, timeoutMs) {
      const found = (): CatalogModel | undefined => models.atRevision(id, revision);
      const now = found();
      if (now !== undefined || timeoutMs <= 0) return Promise.resolve(now);
      return new Promise((resolve) => {
        const check = (): void => {
          const m = found();
          if (m !== undefined) done(m);
        };
        const timer = setTimeout(() => done(undefined), timeoutMs);
        const done = (m: CatalogModel | undefined): void => {
          clearTimeout(timer);
          listeners.delete(check);
          resolve(m);
        };
        listeners.add(check);
      });
    },
  };
}

/** SHOAL_REGISTRY_TOPIC, checked against Kafka's topic alphabet. */
export function readRegistryTopic(r: EnvReader): string {
  const topic = r.string("SHOAL_REGISTRY_TOPIC", REGISTRY_TOPIC);
  if (!/^[A-Za-z0-9._-]{1,249}$/.test(topic)) r.problem(`SHOAL_REGISTRY_TOPIC=${topic}: a Kafka topic name (letters, digits, '.', '_', '-')`);
  return topic;
}

/** A pool's declaration in the YAML, as a digest: what its models are and where they come from, not when they were read. */
function declarationDigest(models: readonly CatalogModel[]): string {
  const hash = createHash("sha256");
  for (const m of models) hash.update(`${JSON.stringify(recordOfCatalogModel(m, "", 0), (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}\n`);
  return hash.digest("hex");
}
