import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, createRouterTransport, createClient } from "@connectrpc/connect";
import { ModelAdminService } from "@shoal/gen/shoal/v1/model_admin_pb.ts";
import { hashApiKey, parseApiKeysDocument, parseApiKeysEnv, type ApiKeySpec } from "./api-keys.ts";
import { ApiKeys, requireApiKey } from "./auth.ts";
import { mapErrors } from "./map-errors.ts";
import { createLogger } from "@shoal/common";

const ADMIN = "sk-admin-0123456789abcdef";
const USER = "sk-user-fedcba9876543210";

describe("API key admin scope", () => {
  test("`scopes` parses from the env form and the file; unknown scopes are problems", () => {
    const problems: string[] = [];
    const [admin, user] = parseApiKeysEnv(`ops=${ADMIN};scopes=admin,acme=${USER}`, problems);
    assert.deepEqual(problems, []);
    assert.deepEqual(admin?.scopes, ["admin"]);
    assert.deepEqual(user?.scopes, []);
    parseApiKeysDocument({ keys: [{ tenant: "x", key: ADMIN, scopes: ["root"] }] }, "keys.yaml", problems);
    assert.match(problems[0] ?? "", /keys\.yaml: keys\[0\]\.scopes: expected a list of admin/);
  });

  test("ModelAdminService needs an admin-scoped key: others get PermissionDenied, admins reach the handler", async () => {
    const specs: ApiKeySpec[] = [
      { tenant: "ops", sha256: hashApiKey(ADMIN), models: "*", lane: "interactive", scopes: ["admin"], source: "ops" },
      { tenant: "acme", sha256: hashApiKey(USER), models: "*", lane: "interactive", source: "acme" },
    ];
    const keys = new ApiKeys(specs);
    const transport = createRouterTransport((router) => router.service(ModelAdminService, { removeModel: () => ({}) }), {
      router: { interceptors: [mapErrors(createLogger("test", "silent")), requireApiKey(keys)] },
    });
    const client = (key: string) => createClient(ModelAdminService, transport).removeModel({ id: "m" }, { headers: { authorization: `Bearer ${key}` } });
    await assert.rejects(client(USER), (err: { code: Code; rawMessage: string }) => {
      assert.equal(err.code, Code.PermissionDenied);
      assert.match(err.rawMessage, /needs the admin scope/);
      return true;
    });
    assert.deepEqual(await client(ADMIN), await client(ADMIN));
  });
});
