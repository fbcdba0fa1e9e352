/**
 * createBrokerPing, the readiness check behind Shoal's Kafka probe: every bootstrap broker is asked
 * on its own connection, so a silent broker (one that accepts a connection and never answers, as a
 * host cut off mid-flight looks) costs its own timeout and hides no other. Real broker, and a real
 * TCP listener that never answers.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, test } from "node:test";
import { createBrokerPing } from "@shoal/kafka-share";
import { createKafkaProbe } from "@shoal/common";
import { brokers } from "./helpers.ts";

let silent: net.Server;
let silentAddress = "";
const sockets = new Set<net.Socket>();
before(async () => {
  silent = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  silentAddress = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

/** A port nothing listens on: connections are refused at once. */
async function closedPort(): Promise<string> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return `127.0.0.1:${port}`;
}

test("a live broker answers; the kept connection answers again", async () => {
  const ping = createBrokerPing({ brokers: [brokers[0]!] });
  try {
    assert.deepEqual(await ping.ping(2_000), { answered: 1, asked: 1 });
    assert.deepEqual(await ping.ping(2_000), { answered: 1, asked: 1 });
  } finally {
    await ping.close();
  }
});

test("one silent broker beside a live one: the cluster still answers, within the ping's timeout", async () => {
  const ping = createBrokerPing({ brokers: [silentAddress, brokers[0]!] });
  try {
    const t0 = performance.now();
    const r = await ping.ping(500);
    const ms = performance.now() - t0;
    assert.equal(r.answered, 1);
    assert.equal(r.asked, 2);
    assert.match(String(r.lastError?.message), /no answer within 500 ms/);
    assert.ok(ms < 1_500, `the ping took ${ms.toFixed(0)} ms`);
    // The silent connection was dropped; the next ping asks it again and still answers.
    assert.equal((await ping.ping(500)).answered, 1);
  } finally {
    await ping.close();
  }
});

test("only silent or refusing brokers: nothing answers, within the timeout, and the last failure is kept", async () => {
  const refused = await closedPort();
  const ping = createBrokerPing({ brokers: [silentAddress, refused] });
  try {
    const t0 = performance.now();
    const r = await ping.ping(400);
    assert.equal(r.answered, 0);
    assert.equal(r.asked, 2);
    assert.ok(r.lastError instanceof Error);
    assert.ok(performance.now() - t0 < 1_500);
  } finally {
    await ping.close();
  }
});

test("the Kafka probe on the ping: reachable with one broker of two silent, unreachable with none answering", async () => {
  const changes: boolean[] = [];
  const live = createBrokerPing({ brokers: [silentAddress, brokers[0]!] });
  const dead = createBrokerPing({ brokers: [silentAddress] });
  let current = live;
  const probe = createKafkaProbe((ms) => current.ping(ms), {
    intervalMs: 100,
    timeoutMs: 300,
    onChange: (r, reason) => {
      changes.push(r);
      if (!r) assert.match(String(reason), /no answer within/);
    },
  });
  try {
    probe.start();
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(probe.reachable, true);
    assert.deepEqual(changes, [], "never flipped while one broker answered");
    current = dead;
    const deadline = Date.now() + 5_000;
    while (probe.reachable && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(probe.reachable, false);
    current = live;
    const back = Date.now() + 5_000;
    while (!probe.reachable && Date.now() < back) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(changes, [false, true]);
  } finally {
    probe.stop();
    await Promise.all([live.close(), dead.close()]);
  }
});

test("an empty broker list or a malformed address is refused up front", () => {
  assert.throws(() => createBrokerPing({ brokers: [] }), RangeError);
  assert.throws(() => createBrokerPing({ brokers: ["no-port"] }), /host:port/);
});
