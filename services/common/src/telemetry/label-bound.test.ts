import assert from "node:assert/strict";
import { test } from "node:test";
import { boundLabel, OTHER_LABEL } from "./label-bound.ts";

test("the first max distinct values pass; later ones are 'other'; values seen before keep passing", () => {
  const label = boundLabel(2);
  assert.equal(label("w-1"), "w-1");
  assert.equal(label("w-2"), "w-2");
  assert.equal(label("forged-3"), OTHER_LABEL);
  assert.equal(label("w-1"), "w-1");
  const many = new Set(Array.from({ length: 10_000 }, (_, i) => label(`forged-${i}`)));
  assert.deepEqual([...many], [OTHER_LABEL]);
  assert.equal(label("w-2"), "w-2");
});
