import assert from "node:assert/strict";
import { test } from "node:test";
import { ConfigError, EnvReader } from "./env-config.ts";

test("every problem is reported at once, each naming its variable", () => {
  const r = new EnvReader({ A: "x", B: "-3", C: "maybe", D: "purple" });
  r.int("A", 1);
  r.int("B", 1, { min: 0 });
  r.bool("C", false);
  r.oneOf("D", ["red", "green"] as const, "red");
  try {
    r.done({});
    assert.fail("expected ConfigError");
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.problems.length, 4);
    assert.match(err.message, /A=x: expected an integer/);
    assert.match(err.message, /B=-3: must be >= 0/);
    assert.match(err.message, /C=maybe/);
    assert.match(err.message, /D=purple: expected one of red, green/);
  }
});

test("unset and empty variables take defaults; the result is frozen", () => {
  const r = new EnvReader({ EMPTY: " ", LIST: "a, b,,c" });
  const cfg = r.done({ s: r.string("EMPTY", "dflt"), n: r.int("NOPE", 7), l: r.list("LIST", []) });
  assert.deepEqual(cfg, { s: "dflt", n: 7, l: ["a", "b", "c"] });
  assert.ok(Object.isFrozen(cfg));
});
