import assert from "node:assert/strict";
import { test } from "node:test";
import { parseRequestLog, ratesBetween } from "./request-log.ts";

const line = (at: string, client: string, api: string, key: number): string =>
  `[2026-12-04 ${at}] Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":${key},"requestApiVersion":2,"correlationId":2,"clientId":"${client}","requestApiKeyName":"${api}"},"request":{"groupId":"g","topics":[]},"response":{"throttleTimeMs":0},"connection":"127.0.0.1:1-127.0.0.1:2-0","totalTimeMs":0.5}`;

test("parses the broker's completed-request lines: time (UTC), client id and API name", () => {
  const text = [
    line("18:03:30,135", "shoal-worker-tb9d711b3-w0-0", "SHARE_FETCH", 78),
    "[2026-12-04 18:03:30,200] some other broker line",
    line("18:03:31,001", "shoal-gateway-tb9d711b3-g0", "OFFSET_COMMIT", 8),
    `[2026-12-04 18:03:31,002] Completed request:{"requestHeader":{"clientId":"cut`,
    "",
  ].join("\n");
  assert.deepEqual(parseRequestLog(text), [
    { atMs: Date.parse("2026-12-04T18:03:30.135Z"), client: "shoal-worker-tb9d711b3-w0-0", api: "SHARE_FETCH" },
    { atMs: Date.parse("2026-12-04T18:03:31.001Z"), client: "shoal-gateway-tb9d711b3-g0", api: "OFFSET_COMMIT" },
  ]);
});

test("rates per second within a window, by role (run ids and member numbers folded), highest first", () => {
  const t0 = Date.parse("2026-12-04T18:00:00.000Z");
  const entries = [
    { atMs: t0, client: "shoal-worker-tb9d711b3-w0-0", api: "SHARE_FETCH" },
    { atMs: t0 + 100, client: "shoal-worker-tb9d711b3-w0-2", api: "SHARE_FETCH" },
    { atMs: t0 + 200, client: "shoal-worker-tb9d711b3-w0-1", api: "SHARE_FETCH" },
    { atMs: t0 + 300, client: "shoal-gateway-t6b6e8ba9-g0", api: "PRODUCE" },
    { atMs: t0 + 2_000, client: "shoal-gateway-t6b6e8ba9-g0", api: "PRODUCE" }, // outside the window
  ];
  assert.deepEqual(
    [...ratesBetween(entries, t0, t0 + 2_000)],
    [
      ["shoal-worker-w0-N SHARE_FETCH", 1.5],
      ["shoal-gateway-g0 PRODUCE", 0.5],
    ],
  );
});
