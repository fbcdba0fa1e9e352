import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { API_KEY_STORAGE_KEY, ApiKeyStore, authProblem, type KeyStorage } from "./api-key.ts";
import { ShoalApi } from "./api.ts";

const KEY = "sk-acme-0123456789abcdef";

/** sessionStorage's contract over a Map. */
function memoryStorage(initial: Record<string, string> = {}): KeyStorage & { readonly items: Map<string, string> } {
  const items = new Map(Object.entries(initial));
  return {
    items,
    getItem: (k) => items.get(k) ?? null,
    setItem: (k, v) => void items.set(k, v),
    removeItem: (k) => void items.delete(k),
  };
}

test("the store keeps the key in (session) storage, trims it, drops a pasted 'Bearer ', refuses what cannot be a key", () => {
  const storage = memoryStorage();
  const store = new ApiKeyStore(storage);
  const changes: Array<string | undefined> = [];
  store.onChange((k) => changes.push(k));
  assert.equal(store.key, undefined);
  assert.equal(store.set(`  Bearer ${KEY} `), undefined);
  assert.equal(store.key, KEY);
  assert.equal(storage.items.get(API_KEY_STORAGE_KEY), KEY);
  assert.equal(new ApiKeyStore(storage).key, KEY, "a reload of the tab keeps it");
  assert.match(store.set("two words") ?? "", /letters, digits/);
  assert.equal(store.set("clé-ü"), "an API key is letters, digits and . _ ~ + / - (no spaces)");
  assert.equal(store.key, KEY, "an invalid entry keeps the current key");
  store.set(KEY);
  assert.deepEqual(changes, [KEY], "setting the same key again is no change");
  store.set("   ");
  assert.equal(store.key, undefined, "an empty field clears the key");
  assert.equal(storage.items.has(API_KEY_STORAGE_KEY), false);
  store.clear();
  assert.deepEqual(changes, [KEY, undefined], "clearing twice is one change");
});

test("storage that is missing, refuses writes or holds garbage: the key still works for the page", () => {
  assert.equal(new ApiKeyStore(undefined).set(KEY), undefined);
  const refusing: KeyStorage = {
    getItem: () => {
      throw new Error("SecurityError");
    },
    setItem: () => {
      throw new Error("QuotaExceededError");
    },
    removeItem: () => {
      throw new Error("SecurityError");
    },
  };
  const store = new ApiKeyStore(refusing);
  assert.equal(store.key, undefined);
  store.set(KEY);
  assert.equal(store.key, KEY);
  store.clear();
  assert.equal(store.key, undefined);
  assert.equal(new ApiKeyStore(memoryStorage({ [API_KEY_STORAGE_KEY]: "not a key\n" })).key, undefined);
});

/** A gateway stand-in behind ShoalApi's fetch: answers ListModels as Connect JSON, or the auth errors the real one sends. */
function fakeGateway(accept: string): { fetch: typeof globalThis.fetch; seen: Array<string | null> } {
  const seen: Array<string | null> = [];
  const fetchImpl: typeof globalThis.fetch = async (input, init) => {
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    const auth = headers.get("authorization");
    seen.push(auth);
    const json = (status: number, body: unknown): Response => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
    if (auth === null) return json(401, { code: "unauthenticated", message: "missing API key: send 'authorization: Bearer <key>'" });
    if (auth !== `Bearer ${accept}`) return json(401, { code: "unauthenticated", message: "API key not recognised" });
    const url = String(input instanceof Request ? input.url : input);
    if (url.endsWith("/shoal.v1.InferenceService/Embed")) {
      return json(403, { code: "permission_denied", message: "tenant 'acme' may not use model 'other' (see ModelService.ListModels)" });
    }
    return json(200, { models: [{ id: "m", dimensions: 3 }] });
  };
  return { fetch: fetchImpl, seen };
}

test("ShoalApi sends 'Authorization: Bearer <key>' on every call while a key is set, read per call", async () => {
  const gateway = fakeGateway(KEY);
  const store = new ApiKeyStore(memoryStorage());
  const api = new ShoalApi("http://gateway.test", { apiKey: () => store.key, fetch: gateway.fetch });

  const missing = await api.listModels().then(
    () => assert.fail("expected Unauthenticated"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.equal(missing.code, Code.Unauthenticated);
  assert.equal(authProblem(missing, store.key !== undefined)?.status, "required");
  assert.match(authProblem(missing, false)?.message ?? "", /requires an API key/);

  store.set("sk-wrong-0123456789abcdef");
  const wrong = await api.listModels().then(
    () => assert.fail("expected Unauthenticated"),
    (e: unknown) => ConnectError.from(e),
  );
  const rejected = authProblem(wrong, store.key !== undefined);
  assert.equal(rejected?.status, "rejected");
  assert.match(rejected?.message ?? "", /API key not recognised/);
  assert.doesNotMatch(rejected?.message ?? "", /sk-wrong/, "the key is never put into a message");

  store.set(KEY);
  const listed = await api.listModels();
  assert.deepEqual(
    listed.value.map((m) => m.id),
    ["m"],
  );
  const denied = await api.embed("other", ["hi"], true).then(
    () => assert.fail("expected PermissionDenied"),
    (e: unknown) => ConnectError.from(e),
  );
  assert.deepEqual(authProblem(denied, true), {
    code: Code.PermissionDenied,
    status: "not allowed",
    message: "PermissionDenied: this key may not use model 'other'.",
  });

  store.clear();
  await assert.rejects(api.listModels());
  assert.deepEqual(gateway.seen, [null, "Bearer sk-wrong-0123456789abcdef", `Bearer ${KEY}`, `Bearer ${KEY}`, null]);
});

test("authProblem: only Unauthenticated and PermissionDenied; a PermissionDenied without a model keeps the gateway's words", () => {
  assert.equal(authProblem(new ConnectError("no worker", Code.Unavailable), true), undefined);
  assert.equal(authProblem(new Error("offline"), false), undefined);
  assert.equal(
    authProblem(new ConnectError("only the ops tenant may do this", Code.PermissionDenied), true)?.message,
    "PermissionDenied: this key may not use this call (only the ops tenant may do this).",
  );
});
