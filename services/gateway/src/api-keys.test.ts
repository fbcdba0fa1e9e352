import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkDuplicateKeys, hashApiKey, parseApiKeysDocument, parseApiKeysEnv } from "./api-keys.ts";

const KEY_A = "sk-acme-0123456789abcdef";
const KEY_B = "sk-beta-fedcba9876543210";

describe("SHOAL_API_KEYS compact form", () => {
  test("tenant=key with options; keys separated by commas; only the hash is kept", () => {
    const problems: string[] = [];
    const specs = parseApiKeysEnv(
      `acme=${KEY_A};models=m1|m2;lane=batch;requestsPerSecond=5;burst=10;tokensPerSecond=2000, beta=sha256:${hashApiKey(KEY_B).toString("hex")}`,
      problems,
    );
    assert.deepEqual(problems, []);
    assert.equal(specs.length, 2);
    const [a, b] = specs;
    assert.equal(a!.tenant, "acme");
    assert.deepEqual(a!.sha256, hashApiKey(KEY_A));
    assert.deepEqual(a!.models, ["m1", "m2"]);
    assert.equal(a!.lane, "batch");
    assert.deepEqual(a!.requests, { perSecond: 5, burst: 10 });
    // Without tokenBurst, one second's worth.
    assert.deepEqual(a!.tokens, { perSecond: 2000, burst: 2000 });
    assert.equal(JSON.stringify(a).includes(KEY_A), false);
    assert.equal(b!.tenant, "beta");
    assert.deepEqual(b!.sha256, hashApiKey(KEY_B));
    assert.equal(b!.models, "*");
    assert.equal(b!.lane, "interactive");
    assert.equal(b!.requests, undefined);
  });

  test("every problem is reported, naming the entry and never the key", () => {
    const problems: string[] = [];
    const specs = parseApiKeysEnv(`bad tenant=short;lane=fast;burst=3;colour=red, ok=${KEY_A};requestsPerSecond=-1, justtext`, problems);
    assert.equal(specs.length, 0);
    const text = problems.join("\n");
    assert.match(text, /SHOAL_API_KEYS\[0\]\.tenant: required/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.key: expected at least 16 characters/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.lane: expected interactive or batch/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.burst: needs requestsPerSecond/);
    assert.match(text, /SHOAL_API_KEYS\[0\]\.colour: unknown field/);
    assert.match(text, /SHOAL_API_KEYS\[1\]\.requestsPerSecond: expected a positive number/);
    assert.match(text, /SHOAL_API_KEYS\[2\]: expected tenant=key/);
    assert.equal(text.includes("short"), false);
    assert.equal(text.includes(KEY_A), false);
  });

  test("an empty list is a problem, not auth silently off", () => {
    const problems: string[] = [];
    parseApiKeysEnv(" , ", problems);
    assert.match(problems.join(), /no keys/);
  });
});

describe("API keys file (parsed YAML or JSON)", () => {
  test("keys with key or sha256, models, lane and rates", () => {
    const problems: string[] = [];
    const specs = parseApiKeysDocument(
      {
        keys: [
          { tenant: "acme", key: KEY_A, models: ["m1"], requestsPerSecond: 0.5, burst: 2, tokensPerSecond: 100, tokenBurst: 500 },
          { tenant: "ops", sha256: hashApiKey(KEY_B).toString("hex").toUpperCase(), models: "*", lane: "batch" },
        ],
      },
      "keys.yaml",
      problems,
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(specs[0]!.requests, { perSecond: 0.5, burst: 2 });
    assert.deepEqual(specs[0]!.tokens, { perSecond: 100, burst: 500 });
    assert.equal(specs[0]!.source, "keys.yaml: keys[0]");
    assert.deepEqual(specs[1]!.sha256, hashApiKey(KEY_B));
    assert.equal(specs[1]!.lane, "batch");
  });

  test("shape problems, both key and sha256, duplicates across sources", () => {
    const problems: string[] = [];
    assert.deepEqual(parseApiKeysDocument([1, 2], "k.json", problems), []);
    assert.match(problems[0]!, /k.json: expected a mapping with a 'keys' list/);
    problems.length = 0;
    const specs = parseApiKeysDocument(
      { keys: [{ tenant: "a", key: KEY_A, sha256: "00" }, "nope", { tenant: "b", key: KEY_A, models: [] }, { tenant: "c", key: KEY_A }], extra: 1 },
      "k.yaml",
      problems,
    );
    assert.equal(specs.length, 1);
    const text = problems.join("\n");
    assert.match(text, /k.yaml: extra: unknown field/);
    assert.match(text, /k.yaml: keys\[0\]: give exactly one of key and sha256/);
    assert.match(text, /k.yaml: keys\[1\]: expected a mapping/);
    assert.match(text, /k.yaml: keys\[2\]\.models: expected '\*' or a non-empty list/);
    const fromEnv = parseApiKeysEnv(`d=${KEY_A}`, problems);
    checkDuplicateKeys([...specs, ...fromEnv], problems);
    assert.match(problems.at(-1)!, /SHOAL_API_KEYS\[0\]: the same key as k.yaml: keys\[3\]/);
  });
});
