/**
 * The gateway's embedding cache (issue #50, docs/cache.md): finished vectors keyed by tenant, model
 * revision, the job's options and the exact text; identical texts in flight at once computed once.
 * A call looks up each distinct text of its inputs, waits for the ones other calls are computing,
 * sends one job for the rest, and assembles the answer in input order.
 */
import { basename } from "node:path";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { type CatalogModel, modelIdentity } from "@shoal/common";
import { EmbedTaskSchema } from "@shoal/gen/shoal/v1/job_pb.ts";
import { CallCancelledError, DeadlineError } from "../errors.ts";
import { type EmbedRow, rowBytes } from "./embed-rows.ts";
import { FlightCache, type Flight, type FlightCacheEvents } from "./flight-cache.ts";

/** What the cache needs of an Embed job's options: the EmbedTask the worker would get, inputs aside. */
export type EmbedTaskOptions = Omit<MessageInitShape<typeof EmbedTaskSchema>, "inputs" | "$typeName">;

export interface EmbedCacheOptions {
  /** SHOAL_EMBED_CACHE_BYTES: most bytes the stored vectors (and their keys) may take; at least 1. */
  readonly maxBytes: number;
  /** SHOAL_EMBED_CACHE_QUANTIZED: cache models whose vectors depend on their batch mates too (dynamic int8). */
  readonly batchDependentModels: boolean;
  readonly events?: FlightCacheEvents;
}

/** A call's rows, and how many of its inputs (and their tokens) its own job did not compute. */
export interface EmbedLookup {
  /** One row per input, in input order. */
  readonly rows: EmbedRow[];
  /** Inputs answered from the cache, from another call's job in flight, or as a repeat of a text earlier in the call. */
  readonly reusedInputs: number;
  readonly reusedTokens: number;
}

/** Computes the rows of `texts` (one job), in their order. */
export type ComputeRows = (texts: string[]) => Promise<EmbedRow[]>;

/** Waits for `p` until the call's own deadline or cancellation (then rejects with DeadlineError / the cancel reason). */
export type CallWait = <T>(p: Promise<T>) => Promise<T>;

// ONNX exports whose activations are quantised per batch (DynamicQuantizeLinear): Xenova's
// model_quantized, optimum's model_qint8_avx512 / model_quint8_avx2, model_int8 / model_uint8.
const DYNAMIC_INT8_FILE = /int8|quantized/i;

/**
 * Whether a model's vectors depend on the other texts of its batch: a dynamic-int8 export picks
 * one activation scale over the whole padded batch (infra/pretrained/maven-parity.test.ts measured
 * cosines down to 0.967 against the text alone). Told by the manifest's `source.quantized` (the
 * Maven exports) or an ONNX file or variant named as such exports are.
 */
export function isBatchDependent(model: CatalogModel): boolean {
  if (model.spec.source?.["quantized"] === true) return true;
  return [model.onnxVariant ?? "", basename(model.spec.modelPath)].some((name) => DYNAMIC_INT8_FILE.test(name));
}

/** See the module comment. */
export class EmbedCache {
  private readonly flights: FlightCache<EmbedRow>;

  constructor(private readonly opts: EmbedCacheOptions) {
    this.flights = new FlightCache<EmbedRow>({
      maxBytes: opts.maxBytes,
      // Keys hold the text: counted at two bytes a character (V8's widest strings).
      sizeOf: (key, row) => key.length * 2 + rowBytes(row),
      ...(opts.events === undefined ? {} : { events: opts.events }),
    });
  }

  /** Bytes the stored entries take now. */
  get bytes(): number {
    return this.flights.bytes;
  }

  /** Entries stored now. */
  get entries(): number {
    return this.flights.entries;
  }

  /**
   * The key prefix of an Embed call of `model` by `tenant` with these options, or undefined when
   * this model's results are not cached (batch-dependent, unless configured otherwise). Every
   * field of the EmbedTask but the inputs is part of the key (serialised), so an option that
   * changes the vectors can never be left out of it.
   */
  scopeOf(model: CatalogModel, tenant: string, task: EmbedTaskOptions): string | undefined {
    if (!this.opts.batchDependentModels && isBatchDependent(model)) return undefined;
    // The model's identity (modelIdentity): a model replaced under the same id gets another key.
    const identity = modelIdentity(model);
    const options = Buffer.from(toBinary(EmbedTaskSchema, create(EmbedTaskSchema, { ...task, inputs: [] }))).toString("base64");
    // JSON escapes every control character: the first raw newline ends the prefix.
    return `${JSON.stringify([tenant, identity, options])}\n`;
  }

  /**
   * The rows of `texts` under `scope`: each distinct text is a hit, a join of a computation in
   * flight of the same `group` (lane), or one of the texts of this call's own job (`compute`,
   * sent at most once per round). A join whose owner gives up is looked up again, so a waiter is
   * answered by someone's job or its own, never left waiting; `wait` bounds it by the caller's
   * own deadline. A failed job fails this call (its flights' waiters look again).
   */
  async embed(scope: string, group: string, texts: readonly string[], compute: ComputeRows, wait: CallWait): Promise<EmbedLookup> {
    const slots = new Map<string, number>();
    const distinct: string[] = [];
    const slotOf = texts.map((text) => {
      let slot = slots.get(text);
      if (slot === undefined) {
        slot = distinct.length;
        slots.set(text, slot);
        distinct.push(text);
      }
      return slot;
    });
    const rows: (EmbedRow | undefined)[] = new Array(distinct.length);
    const computed = new Set<number>();
    let todo = distinct.map((_, i) => i);
    while (todo.length > 0) {
      const owned: { slot: number; flight: Flight<EmbedRow> }[] = [];
      const joined: Promise<number | undefined>[] = [];
      for (const slot of todo) {
        const found = this.flights.lookup(scope + distinct[slot], group);
        if (found.kind === "hit") rows[slot] = found.value;
        else if (found.kind === "own") owned.push({ slot, flight: found.flight });
        else {
          // The slot to look up again when the owner gave up; undefined once answered.
          joined.push(
            found.result.then((row) => {
              if (row === undefined) return slot;
              rows[slot] = row;
              return undefined;
            }),
          );
        }
      }
      const computing = owned.length === 0 ? Promise.resolve() : this.run(owned, distinct, compute, rows, computed);
      const [, again] = await wait(Promise.all([computing, Promise.all(joined)]));
      todo = again.filter((slot) => slot !== undefined);
    }
    const out = slotOf.map((slot) => rows[slot]!);
    let reusedInputs = 0;
    let reusedTokens = 0;
    const seen = new Set<number>();
    for (const [i, slot] of slotOf.entries()) {
      // An input counts as computed once: the first time its text appears, if this call's job ran it.
      if (computed.has(slot) && !seen.has(slot)) {
        seen.add(slot);
        continue;
      }
      reusedInputs++;
      reusedTokens += out[i]!.tokens;
    }
    return { rows: out, reusedInputs, reusedTokens };
  }

  /** Runs one job for the owned slots; settles their flights with its rows, or abandons them when it fails. */
  private async run(
    owned: readonly { slot: number; flight: Flight<EmbedRow> }[],
    distinct: readonly string[],
    compute: ComputeRows,
    rows: (EmbedRow | undefined)[],
    computed: Set<number>,
  ): Promise<void> {
    try {
      const got = await compute(owned.map((o) => distinct[o.slot]!));
      if (got.length !== owned.length) throw new Error(`expected ${owned.length} rows, got ${got.length}`);
      for (const [k, o] of owned.entries()) {
        rows[o.slot] = got[k]!;
        computed.add(o.slot);
        o.flight.settle(got[k]!);
      }
    } catch (err) {
      for (const o of owned) o.flight.abandon();
      throw err;
    }
  }
}

/**
 * A call's own bound on waiting for others: rejects with DeadlineError at `deadlineUnixMs`
 * (reporting `timeoutMs`, as PendingJobs does) or with the signal's reason when the caller leaves.
 */
export function callWait(signal: AbortSignal, deadlineUnixMs: number, timeoutMs: number): CallWait {
  return <T>(p: Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason ?? new CallCancelledError("call cancelled"));
        return;
      }
      const onAbort = (): void => finish(() => reject(signal.reason ?? new CallCancelledError("call cancelled")));
      const timer = setTimeout(() => finish(() => reject(new DeadlineError(timeoutMs))), Math.max(0, deadlineUnixMs - Date.now()));
      signal.addEventListener("abort", onAbort, { once: true });
      let done = false;
      function finish(then: () => void): void {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        then();
      }
      p.then(
        (v) => finish(() => resolve(v)),
        (err: unknown) => finish(() => reject(err)),
      );
    });
}
