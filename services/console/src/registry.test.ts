import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { addRequestOf, defaultPool, refusalOf, shortRevision } from "./registry.ts";

test("shortRevision: a commit sha cut to 7 characters, other revisions as they are, none as a dash", () => {
  assert.equal(shortRevision("0123456789abcdef0123456789abcdef01234567"), "0123456");
  assert.equal(shortRevision("v1.2"), "v1.2");
  assert.equal(shortRevision("abc1234"), "abc1234");
  assert.equal(shortRevision(""), "—");
});

test("defaultPool: the pool most models are in, the first listed on a tie, empty for none", () => {
  assert.equal(defaultPool([{ pool: "gpu" }, { pool: "cpu" }, { pool: "cpu" }]), "cpu");
  assert.equal(defaultPool([{ pool: "a" }, { pool: "b" }]), "a");
  assert.equal(defaultPool([{ pool: "" }, { pool: "" }]), "");
  assert.equal(defaultPool([]), "");
});

test("refusalOf: the Connect code's name and the gateway's own message; an admin-key hint for auth codes", () => {
  const notFound = refusalOf(new ConnectError("no folder at /no/such/model", Code.NotFound));
  assert.deepEqual(notFound, { code: "NotFound", message: "no folder at /no/such/model", hint: undefined });
  assert.equal(refusalOf(new ConnectError("source: must be absolute", Code.InvalidArgument)).code, "InvalidArgument");
  const denied = refusalOf(new ConnectError("tenant 't' may not change the model registry", Code.PermissionDenied));
  assert.equal(denied.code, "PermissionDenied");
  assert.equal(denied.message, "tenant 't' may not change the model registry");
  assert.match(denied.hint ?? "", /admin scope/);
  assert.equal(refusalOf(new TypeError("Failed to fetch")).code, "Unknown");
});

test("addRequestOf: fields trimmed; an empty source is a problem, an empty id or pool is left to the gateway", () => {
  assert.deepEqual(addRequestOf({ source: "  /models/e5 \n", id: " e5 ", pool: "", pinned: true }), {
    request: { source: "/models/e5", id: "e5", pool: "", pinned: true },
    problem: undefined,
  });
  assert.match(addRequestOf({ source: "   ", id: "x", pool: "p", pinned: false }).problem ?? "", /enter a source/);
});
