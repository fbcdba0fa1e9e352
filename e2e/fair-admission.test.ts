import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { InferenceService } from "@shoal/gen/shoal/v1/inference_pb.ts";
import { startCluster, type TestCluster } from "./harness/cluster.ts";
import { scrape, total } from "./harness/prometheus.ts";

/**
 * Fair admission across callers (issue #19, part 6), as a new user met the problem: one caller's
 * stream of huge Embed calls filled the interactive lane and another caller's small calls were
 * refused with ResourceExhausted. With the lane's in-flight budget shared per API key, the greedy
 * caller is refused (it is over its share) and the polite one never is.
 */
const GREEDY = `sk-greedy-${randomBytes(12).toString("hex")}`;
const POLITE = `sk-polite-${randomBytes(12).toString("hex")}`;
const IN_FLIGHT_TOKENS = 20_000;

function client(base: string, key: string) {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };
  return createClient(InferenceService, createConnectTransport({ baseUrl: base, httpVersion: "1.1", interceptors: [auth] }));
}

describe("fair admission: one caller's huge requests do not get another's small ones refused", () => {
  let cluster: TestCluster;

  before(async () => {
    cluster = await startCluster({
      presets: ["mini"],
      gatewayEnv: {
        SHOAL_API_KEYS: `greedy=${GREEDY}, polite=${POLITE}`,
        SHOAL_MAX_INFLIGHT_TOKENS_INTERACTIVE: String(IN_FLIGHT_TOKENS),
      },
    });
  });
  after(async () => {
    await cluster?.stop();
  });

  test("greedy: 6 streams of 64 long texts per call; polite: 8 one-text calls meanwhile", { timeout: 180_000 }, async () => {
    const model = cluster.modelIds[0]!;
    const greedy = client(cluster.urls[0]!, GREEDY);
    const polite = client(cluster.urls[0]!, POLITE);
    const long = Array.from({ length: 64 }, (_, i) => `${i} ${"many words in a long document ".repeat(12)}`);
    let greedyRefused = 0;
    let greedyAnswered = 0;
    let stop = false;
    const streams = Array.from({ length: 6 }, async () => {
      while (!stop) {
        try {
          await greedy.embed({ model, inputs: long, options: { truncate: true } }, { timeoutMs: 120_000 });
          greedyAnswered++;
        } catch (err) {
          if (ConnectError.from(err).code !== Code.ResourceExhausted) throw err;
          greedyRefused++;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    });
    // Let the greedy caller fill the lane first.
    for (let i = 0; i < 100 && greedyRefused === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(greedyRefused > 0, "the greedy caller filled the lane (else this test shows nothing)");
    const politeCodes: string[] = [];
    for (let i = 0; i < 8; i++) {
      try {
        const res = await polite.embed({ model, inputs: [`a small query ${i}`] }, { timeoutMs: 120_000 });
        assert.equal(res.embeddings.length, 1);
        politeCodes.push("ok");
      } catch (err) {
        politeCodes.push(Code[ConnectError.from(err).code]);
      }
    }
    stop = true;
    await Promise.all(streams);
    const m = await scrape(`${cluster.urls[0]}/metrics`, POLITE);
    process.stderr.write(
      `greedy: ${greedyAnswered} answered, ${greedyRefused} refused; polite: ${politeCodes.filter((c) => c === "ok").length}/8 answered; fair-share refusals ${total(m, "shoal_gateway_admission_rejections_total", { reason: "fair-share" })}\n`,
    );
    assert.deepEqual(politeCodes, Array(8).fill("ok"), "every small call of the polite caller is admitted and answered");
    assert.ok(total(m, "shoal_gateway_admission_rejections_total", { lane: "interactive" }) >= greedyRefused);
  });
});
