import assert from "node:assert/strict";
import { test } from "node:test";
import { ModelSourceError } from "./errors.ts";
import { parseModelSource } from "./model-source.ts";
import { readHubSettings } from "./settings.ts";
import { repoFolderName } from "./cache.ts";

test("hf: ids parse into repo and revision, main by default", () => {
  assert.deepEqual(parseModelSource("hf:BAAI/bge-small-en-v1.5"), { kind: "hf", repo: "BAAI/bge-small-en-v1.5", revision: "main" });
  assert.deepEqual(parseModelSource("hf:org/name@v1.0"), { kind: "hf", repo: "org/name", revision: "v1.0" });
  assert.deepEqual(parseModelSource("hf:org/name@refs/pr/3"), { kind: "hf", repo: "org/name", revision: "refs/pr/3" });
  const sha = "0123456789abcdef0123456789abcdef01234567";
  assert.deepEqual(parseModelSource(`hf:org/name@${sha}`), { kind: "hf", repo: "org/name", revision: sha });
});

test("anything else is a folder", () => {
  assert.deepEqual(parseModelSource("/models/bge"), { kind: "folder", path: "/models/bge" });
  assert.deepEqual(parseModelSource("./models/org--name"), { kind: "folder", path: "./models/org--name" });
});

test("malformed hf: ids are refused with the reason", () => {
  const cases: [string, RegExp][] = [
    ["hf:", /missing repository id/],
    ["hf:name-only", /must be <org>\/<name>/],
    ["hf:a/b/c", /must be <org>\/<name>/],
    ["hf:org/na me", /may only hold/],
    ["hf:org/a--b", /may not contain '--'/],
    ["hf:org/name@", /empty revision/],
    ["hf:org/name@a b", /whitespace/],
    ["hf:org/name@../x", /'\.\.'/],
    ["", /empty/],
  ];
  for (const [source, reason] of cases) {
    assert.throws(
      () => parseModelSource(source),
      (err: unknown) => err instanceof ModelSourceError && reason.test(err.message) && err.message.includes(JSON.stringify(source)),
      source,
    );
  }
});

test("settings follow huggingface_hub's environment variables", () => {
  const s = readHubSettings({ HF_HOME: "/h", HF_ENDPOINT: "http://mirror:8080/", HF_TOKEN: " hf_abc\n", HF_HUB_OFFLINE: "yes" });
  assert.deepEqual(s, { endpoint: "http://mirror:8080", token: "hf_abc", cacheDir: "/h/hub", offline: true });
  const d = readHubSettings({ HF_HOME: "/nonexistent-hf-home", HF_HUB_CACHE: "/c" });
  assert.equal(d.endpoint, "https://huggingface.co");
  assert.equal(d.token, undefined);
  assert.equal(d.cacheDir, "/c");
  assert.equal(d.offline, false);
  assert.equal(repoFolderName("org/name"), "models--org--name");
});
