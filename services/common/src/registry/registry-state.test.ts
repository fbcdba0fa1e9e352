import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { RegistryModelSchema } from "@shoal/gen/shoal/v1/registry_pb.ts";
import { aliasKey, aliasRecordValue, modelKey, modelRecordValue, RegistryRecordError, RegistryState, seedKey, seedRecordValue } from "./registry-state.ts";
import { LiveModels } from "./live-models.ts";
import type { CatalogModel } from "../catalog.ts";

const model = (id: string, extra: { compositeJson?: string } = {}) =>
  modelRecordValue(create(RegistryModelSchema, { id, source: `/models/${id}`, revision: "r1", pool: "default", ...extra }));

function stateWith(models: string[], aliases: Record<string, string> = {}): RegistryState {
  const s = new RegistryState();
  for (const m of models) s.apply(modelKey(m), model(m));
  for (const [a, t] of Object.entries(aliases)) s.apply(aliasKey(a), aliasRecordValue(a, t, 1));
  return s;
}

describe("registry state", () => {
  test("records apply in log order: the last write per key wins, a tombstone removes", () => {
    const s = new RegistryState();
    assert.deepEqual(s.apply(modelKey("a"), model("a")).kind, "model");
    s.apply(modelKey("b"), model("b"));
    assert.deepEqual([...s.models.keys()], ["a", "b"]);
    const removed = s.apply(modelKey("a"), null);
    assert.deepEqual(removed, { kind: "model", id: "a", model: undefined });
    assert.deepEqual([...s.models.keys()], ["b"]);
    // An empty value is a tombstone too (as Kafka tools write one).
    s.apply(modelKey("b"), new Uint8Array(0));
    assert.equal(s.models.size, 0);
  });

  test("a seed marker marks its pool as owned by the registry; a tombstone does not undo it", () => {
    const s = new RegistryState();
    s.apply(seedKey("default"), seedRecordValue("default", "g0", 1, "d1", ["a", "b"]));
    s.apply(seedKey("default"), null);
    assert.deepEqual([...s.seeded], [["default", { digest: "d1", models: ["a", "b"] }]]);
  });

  test("malformed records are refused: unknown key kind, bad name, a value under another key, undecodable bytes", () => {
    const s = new RegistryState();
    assert.throws(() => s.apply("pool/x", model("x")), RegistryRecordError);
    assert.throws(() => s.apply("model/Bad Name", model("x")), RegistryRecordError);
    assert.throws(() => s.apply(modelKey("a"), model("b")), /not model 'a'/);
    assert.throws(() => s.apply(aliasKey("a"), model("a")), /not alias 'a'/);
    assert.throws(() => s.apply(modelKey("a"), new Uint8Array([0xff, 0xff, 0xff])), RegistryRecordError);
    assert.equal(s.models.size, 0);
  });

  test("aliases resolve through chains to a model; dangling and looping ones resolve to nothing", () => {
    const s = stateWith(["m1", "m2"], { "embed-default": "m1", outer: "embed-default" });
    assert.equal(s.resolve("m2"), "m2");
    assert.equal(s.resolve("embed-default"), "m1");
    assert.equal(s.resolve("outer"), "m1");
    assert.deepEqual(s.aliasesOf("m1"), ["embed-default", "outer"]);
    // Repointing is one record: every later lookup sees the new target.
    s.apply(aliasKey("embed-default"), aliasRecordValue("embed-default", "m2", 2));
    assert.equal(s.resolve("outer"), "m2");
    assert.deepEqual(s.aliasesOf("m1"), []);
    // A loop written by two racing gateways still resolves to nothing rather than spinning.
    s.apply(aliasKey("x"), aliasRecordValue("x", "y", 3));
    s.apply(aliasKey("y"), aliasRecordValue("y", "x", 3));
    assert.equal(s.resolve("x"), undefined);
    s.apply(modelKey("m2"), null);
    assert.equal(s.resolve("outer"), undefined, "dangling once its model is removed");
  });

  test("alias checks: loops, dangling targets, a name taken by a model, bad names", () => {
    const s = stateWith(["m1"], { a: "m1", b: "a" });
    assert.equal(s.aliasProblem("c", "b"), undefined);
    assert.equal(s.aliasProblem("a", "m1"), undefined, "repointing to the same model is fine");
    assert.equal(s.aliasProblem("a", "b")?.code, "invalid");
    assert.match(s.aliasProblem("a", "b")?.message ?? "", /alias loop: a → b → a/);
    assert.equal(s.aliasProblem("a", "a")?.code, "invalid");
    assert.equal(s.aliasProblem("c", "nope")?.code, "not-found");
    assert.equal(s.aliasProblem("m1", "a")?.code, "exists");
    assert.equal(s.aliasProblem("Bad!", "m1")?.code, "invalid");
    assert.equal(s.aliasProblem("c", "")?.code, "invalid");
  });

  test("add and remove checks: duplicate ids, alias names, unknown models, models something points at", () => {
    const s = stateWith(["m1", "m2"], { a: "m1" });
    s.apply(modelKey("zs"), model("zs", { compositeJson: JSON.stringify({ kind: "bi-encoder", embedder: "m2" }) }));
    assert.equal(s.addProblem("m3"), undefined);
    assert.equal(s.addProblem("m1")?.code, "exists");
    assert.equal(s.addProblem("a")?.code, "exists");
    assert.equal(s.addProblem("UPPER")?.code, "invalid");
    assert.equal(s.removeProblem("nope")?.code, "not-found");
    assert.match(s.removeProblem("m1")?.message ?? "", /alias 'a' points at 'm1'/);
    assert.match(s.removeProblem("m2")?.message ?? "", /'zs' scores through 'm2'/);
    assert.equal(s.removeProblem("zs"), undefined);
  });
});

describe("live models", () => {
  const served = (id: string): CatalogModel =>
    ({ id, pool: "default", batching: {}, pinned: false, memoryBytes: undefined, revision: "r1" }) as unknown as CatalogModel;

  test("get answers for aliases, iteration lists served models only", () => {
    const s = stateWith(["m1"], { a: "m1" });
    const live = new LiveModels();
    live.configure((n) => s.resolve(n), 0);
    live.serve(served("m1"));
    assert.equal(live.get("a")?.id, "m1");
    assert.equal(live.has("a"), true);
    assert.deepEqual([...live.keys()], ["m1"]);
    assert.equal(live.get("nope"), undefined);
  });

  test("a retired model stays reachable by get during the grace period only, never listed", () => {
    const live = new LiveModels();
    live.configure(() => undefined, 60_000);
    live.serve(served("m1"));
    live.retire("m1", Date.now());
    assert.equal(live.get("m1")?.id, "m1");
    assert.equal(live.size, 0);
    live.retire("m1");
    const gone = new LiveModels();
    gone.configure(() => undefined, 0);
    gone.serve(served("m1"));
    gone.retire("m1");
    assert.equal(gone.get("m1"), undefined, "no grace: gone at once (a gateway)");
    live.serve(served("m1"));
    assert.equal(live.size, 1);
  });

  test("revisions replaced or removed are remembered as superseded; unseen and current ones are not", () => {
    const at = (revision: string): CatalogModel => ({ ...served("m1"), revision }) as CatalogModel;
    const live = new LiveModels();
    live.configure(() => undefined, 60_000);
    live.serve(at("r1"));
    assert.equal(live.wasSuperseded("m1", "r1"), false, "served now");
    live.serve(at("r1"));
    assert.equal(live.wasSuperseded("m1", "r1"), false, "the same revision served again");
    live.serve(at("r2"));
    assert.equal(live.wasSuperseded("m1", "r1"), true, "replaced in place");
    live.retire("m1");
    live.serve(at("r3"));
    assert.equal(live.wasSuperseded("m1", "r2"), true, "removed, then another added under the id");
    assert.equal(live.wasSuperseded("m1", "r9"), false, "never seen here: maybe ahead of this process");
    assert.equal(live.wasSuperseded("m1", ""), false);
    assert.equal(live.wasSuperseded("other", "r1"), false);
    // What a worker runs a job written for each revision on (ModelRegistry.waitFor).
    assert.equal(live.atRevision("m1", "r3")?.revision, "r3", "the revision served now");
    assert.equal(live.atRevision("m1", "r1")?.revision, "r3", "a replaced revision: the one served now, never the old one");
    assert.equal(live.atRevision("m1", "r9"), undefined, "an unseen revision: waited for");
    assert.equal(live.atRevision("m1", "")?.revision, "r3");
  });
});
