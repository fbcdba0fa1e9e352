import assert from "node:assert/strict";
import { test } from "node:test";
import { clampTimeoutHeaders } from "./timeout-headers.ts";

test("timeouts beyond a Node timer are lowered to the longest that fits; others are left alone", () => {
  const cases: Array<[Record<string, string>, Record<string, string>]> = [
    [{ "grpc-timeout": "99999999H" }, { "grpc-timeout": "99999999m" }],
    [{ "grpc-timeout": "596H" }, { "grpc-timeout": "596H" }],
    [{ "grpc-timeout": "597H" }, { "grpc-timeout": "99999999m" }],
    [{ "grpc-timeout": "5S" }, { "grpc-timeout": "5S" }],
    [{ "grpc-timeout": "junk" }, { "grpc-timeout": "junk" }],
    [{ "connect-timeout-ms": "9999999999" }, { "connect-timeout-ms": "2147483647" }],
    [{ "connect-timeout-ms": "2147483647" }, { "connect-timeout-ms": "2147483647" }],
    [{ "connect-timeout-ms": "-1" }, { "connect-timeout-ms": "-1" }],
  ];
  for (const [input, expected] of cases) {
    const headers = { ...input };
    clampTimeoutHeaders(headers);
    assert.deepEqual(headers, expected, JSON.stringify(input));
  }
});
