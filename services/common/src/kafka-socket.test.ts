import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";
import { type ISocketFactoryArgs, Kafka, logLevel } from "kafkajs";
import { kafkaSocketFactory } from "./kafka.ts";

/**
 * A listener on 127.0.0.1 that never accepts: a child process listens with a backlog of 1 (0 would mean Node's default), then
 * blocks its event loop. Once two connections fill its accept queue, the kernel drops every further
 * SYN, as a network partition does: a connect to it stays pending through the kernel's retries.
 */
let holder: ChildProcess;
let port = 0;
const filler: net.Socket[] = [];

const HOLD = `const s = require("node:net").createServer().listen({ host: "127.0.0.1", port: 0, backlog: 1 }, () => {
  process.stdout.write(String(s.address().port) + "\\n");
  setTimeout(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000), 20);
});`;

/** What kafkajs passes for a client without TLS: its `ssl` setting, unset (the type says options). */
const plain = (args: Omit<ISocketFactoryArgs, "ssl">): ISocketFactoryArgs => ({ ...args, ssl: undefined }) as unknown as ISocketFactoryArgs;

const connectingAfter = async (socket: net.Socket, ms: number): Promise<boolean> => {
  await sleep(ms);
  return socket.connecting;
};

before(async () => {
  holder = spawn(process.execPath, ["-e", HOLD], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(holder.stdout!, "data")) as [Buffer];
  port = Number(line.toString().trim());
  await sleep(100);
  // Fill the accept queue: connects complete until it is full, then one stays pending.
  for (let i = 0; i < 8; i++) {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.on("error", () => {});
    filler.push(socket);
    if (await connectingAfter(socket, 200)) return;
  }
  throw new Error("the listener's accept queue never filled");
});

after(() => {
  for (const socket of filler) socket.destroy();
  holder.kill("SIGKILL");
});

test("premise: a plain socket ended while its connect is unanswered stays open (the kernel's SYN retries)", async () => {
  const socket = net.connect({ host: "127.0.0.1", port });
  socket.on("error", () => {});
  await sleep(100);
  socket.end();
  assert.equal(await connectingAfter(socket, 500), true, "still connecting 500 ms after end()");
  assert.equal(socket.destroyed, false);
  socket.destroy();
});

test("Shoal's Kafka socket: end() on a pending connect destroys it at once", async () => {
  let connected = false;
  const socket = kafkaSocketFactory(plain({ host: "127.0.0.1", port, onConnect: () => (connected = true) }));
  socket.on("error", () => {});
  await sleep(100);
  assert.equal(socket.connecting, true);
  const closed = once(socket, "close");
  socket.end();
  assert.equal(socket.destroyed, true);
  await closed;
  assert.equal(connected, false);
});

test("Shoal's Kafka socket: end() on a connected socket still ends it gracefully (FIN after the writes)", async () => {
  const server = net.createServer();
  const received: Buffer[] = [];
  server.on("connection", (peer) => peer.on("data", (b: Buffer) => received.push(b)).on("end", () => peer.end()));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port: open } = server.address() as net.AddressInfo;
  const socket = kafkaSocketFactory(plain({ host: "127.0.0.1", port: open, onConnect: () => {} }));
  await once(socket, "connect");
  socket.write("last words");
  const closed = once(socket, "close");
  socket.end();
  assert.equal(socket.destroyed, false, "a connected socket is ended, not destroyed");
  await closed;
  assert.equal(Buffer.concat(received).toString(), "last words");
  server.close();
});

test("through kafkajs: a broker that never answers leaves no pending connect once kafkajs gives up", async () => {
  // kafkajs' own client with Shoal's socket factory and no retries: its connection timeout ends
  // the socket, as it does for each broker a Shoal service cannot reach.
  const kafka = new Kafka({
    clientId: "socket-test",
    brokers: [`127.0.0.1:${port}`],
    connectionTimeout: 300,
    retry: { retries: 0 },
    socketFactory: kafkaSocketFactory,
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  const pending = (): number => process.getActiveResourcesInfo().filter((r) => r === "ConnectWrap").length;
  const before = pending();
  await assert.rejects(admin.connect(), /timeout/i);
  await sleep(200);
  assert.equal(pending(), before, `pending connects left behind: ${pending() - before}`);
  await admin.disconnect();
});
