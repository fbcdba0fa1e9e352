/**
 * `npm run bench:result-stream` — what handing one result to its gateway costs, as a frame of the
 * worker's result stream against one POST each (issue #17), with the real halves: the worker's
 * createDirectReplies here, the gateway's direct-reply listener in a child process (so each side's
 * CPU is its own process's). Results are encoded JobResults of one 384-dimension vector, as the
 * default model's. Phases alternate stream / POST (A B A B) at each concurrency (results in flight
 * at once), so the host's noise falls on both alike; prints CPU µs per result on each side, and
 * stream ÷ POST. Asserts nothing (a benchmark, not a test).
 *
 * Env: BENCH_RESULTS (results per phase, default 20000), BENCH_CONCURRENCY (default "1,8").
 */
import { fork } from "node:child_process";
import { create } from "@bufbuild/protobuf";
import { encodeResult } from "@shoal/common";
import { EmbedOutputSchema, JobResultSchema, JobStatus } from "@shoal/gen/shoal/v1/job_pb.ts";
import { pino } from "pino";
import { createDirectReplyServer } from "../../services/gateway/src/direct-replies.ts";
import { createDirectReplies, type DirectReplies } from "../../services/worker/src/queue/direct-replies.ts";

const INSTANCE = "bench-gateway";
const log = pino({ level: "silent" });
type Cpu = { user: number; system: number };

if (process.argv[2] === "listener") {
  const server = createDirectReplyServer(log, {
    instanceId: INSTANCE,
    replyTopic: `shoal.replies.${INSTANCE}`,
    host: "127.0.0.1",
    port: 0,
    advertise: undefined,
    // Every result finds its call (settling is the same work on both paths, so it is left out).
    onResult: () => "delivered",
  });
  const address = await server.start();
  process.on("message", (m) => {
    if (m === "cpu") process.send!(process.cpuUsage());
    if (m === "stop") void server.stop().then(() => process.exit(0));
  });
  process.send!(address);
} else {
  const RESULTS = Number(process.env["BENCH_RESULTS"] ?? 20_000);
  const CONCURRENCY = (process.env["BENCH_CONCURRENCY"] ?? "1,8").split(",").map(Number);
  const out = (msg: string): void => void process.stderr.write(`${msg}\n`);

  const child = fork(process.argv[1]!, ["listener"], { execArgv: process.execArgv });
  const address = await new Promise<string>((r) => child.once("message", (m) => r(String(m))));
  const listenerCpu = (): Promise<Cpu> =>
    new Promise((r) => {
      child.once("message", (m) => r(m as Cpu));
      child.send("cpu");
    });
  const vector = Buffer.alloc(384 * 4);
  for (let i = 0; i < 384; i++) vector.writeFloatLE(Math.sin(i), i * 4);
  const resultOf = (i: number): Buffer =>
    Buffer.from(
      encodeResult(
        create(JobResultSchema, {
          jobId: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
          status: JobStatus.OK,
          workerId: "bench-worker",
          output: { case: "embed", value: create(EmbedOutputSchema, { dimensions: 384, vectors: vector }) },
        }),
      ),
    );
  const trace = { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };
  const arms = { stream: createDirectReplies(log, { stream: true }), post: createDirectReplies(log, { stream: false }) };
  const target = { address, instanceId: INSTANCE };

  /** Sends `n` results, `conc` at a time; returns the CPU µs per result here and in the listener. */
  async function phase(direct: DirectReplies, n: number, conc: number): Promise<{ here: number; there: number; perS: number; failed: number }> {
    const l0 = await listenerCpu();
    const h0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: conc }, async () => {
        while (next < n) if (!(await direct.send(target, resultOf(next++), trace))) failed++;
      }),
    );
    const ms = performance.now() - t0;
    const h1 = process.cpuUsage();
    const l1 = await listenerCpu();
    const us = (a: Cpu, b: Cpu): number => (b.user + b.system - a.user - a.system) / n;
    return { here: us(h0, h1), there: us(l0, l1), perS: (n / ms) * 1000, failed };
  }

  out(`==> warm-up: ${RESULTS} results on each arm`);
  for (const arm of [arms.stream, arms.post]) await phase(arm, RESULTS, 8);
  const rows: string[] = [];
  for (const conc of CONCURRENCY) {
    const sums = { stream: { here: 0, there: 0, perS: 0 }, post: { here: 0, there: 0, perS: 0 } };
    for (const [i, name] of (["stream", "post", "stream", "post"] as const).entries()) {
      const r = await phase(arms[name], RESULTS, conc);
      out(
        `   ${conc} in flight, phase ${i + 1}/4 (${name}): worker ${r.here.toFixed(1)} µs, gateway ${r.there.toFixed(1)} µs per result, ${r.perS.toFixed(0)}/s, ${r.failed} fell back`,
      );
      sums[name].here += r.here / 2;
      sums[name].there += r.there / 2;
      sums[name].perS += r.perS / 2;
    }
    const ratio = (f: (s: { here: number; there: number; perS: number }) => number): string => (f(sums.stream) / f(sums.post)).toFixed(2);
    rows.push(`| ${conc} in flight: worker CPU µs per result | ${sums.stream.here.toFixed(1)} | ${sums.post.here.toFixed(1)} | ${ratio((s) => s.here)} |`);
    rows.push(`| ${conc} in flight: gateway CPU µs per result | ${sums.stream.there.toFixed(1)} | ${sums.post.there.toFixed(1)} | ${ratio((s) => s.there)} |`);
    rows.push(`| ${conc} in flight: results per second | ${sums.stream.perS.toFixed(0)} | ${sums.post.perS.toFixed(0)} | ${ratio((s) => s.perS)} |`);
  }
  console.log(
    [
      "",
      `Result stream against one POST per result — real worker client and gateway listener, ${RESULTS} results per phase, A B A B`,
      "",
      "| | stream | POST each | stream ÷ POST |",
      "| --- | --- | --- | --- |",
      ...rows,
    ].join("\n"),
  );
  arms.stream.close();
  arms.post.close();
  child.send("stop");
}
