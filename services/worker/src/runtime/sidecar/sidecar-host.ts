/**
 * One runtime sidecar process for a worker (services/sidecar-pytorch): started, health-checked and
 * restarted by the worker. The worker listens on a Unix socket in a private temp folder; the
 * sidecar connects, says hello, then answers frames in order (PROTOCOL.md).
 *
 * A sidecar that exits, closes its socket, or leaves a request unanswered past `hangTimeoutMs` is
 * killed; every request in flight fails with `thread-crashed` (the worker's job lifecycle sends
 * such jobs round the retry topic, so none is lost) and a new process is started after a backoff.
 * Listeners of {@link SidecarHost.onRestart} then reload their models.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { InferenceError } from "../errors.ts";
import type { ThreadsLogger } from "../inference-threads.ts";
import { encodeFrame, type Frame, FrameReader, type OutTensor } from "./frames.ts";

/** The sidecar's greeting: what it runs on. */
export interface SidecarHello {
  readonly pid: number;
  /** `cpu` or `cuda`. */
  readonly device: string;
  readonly deviceName: string;
  readonly dtype: string;
  readonly torch: string;
}

export interface SidecarHostOptions {
  /** `pytorch`: the sidecar's name, as in the catalog's `runtime: sidecar:<name>`. */
  readonly name: string;
  /** Interpreter with torch and transformers. */
  readonly python: string;
  /** The sidecar's entry script. */
  readonly script: string;
  readonly device: "auto" | "cpu" | "cuda";
  /** `auto` (float16 on CUDA, float32 on CPU), `fp32`, `fp16` or `bf16`. */
  readonly dtype: string;
  /** CPU threads for PyTorch; 0 lets it pick. */
  readonly threads: number;
  readonly logger: ThreadsLogger;
  /** How long a process may take to connect and say hello (default 120 s: imports and CUDA init). */
  readonly startTimeoutMs?: number;
  /** A request unanswered this long means a hung sidecar (default 120 s). */
  readonly hangTimeoutMs?: number;
  /** The same for `load` requests, which read weights and may compile (default 10 min). */
  readonly loadTimeoutMs?: number;
  /** Idle health-check period (default 5 s). */
  readonly pingIntervalMs?: number;
  /** First restart delay; doubles up to 10 s while restarts keep failing (default 500 ms). */
  readonly restartDelayMs?: number;
}

interface Pending {
  readonly resolve: (f: Frame) => void;
  readonly reject: (e: Error) => void;
  readonly sentAt: number;
  /** Unanswered past this, the sidecar is taken as hung. */
  readonly limitMs: number;
}

interface Live {
  readonly child: ChildProcess;
  readonly socket: Socket;
  readonly hello: SidecarHello;
  readonly generation: number;
}

/** A sidecar request that failed on the sidecar's side (its `error` reply). */
export class SidecarRequestError extends Error {
  override readonly name = "SidecarRequestError";
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export class SidecarHost {
  private live: Live | undefined;
  private starting: Promise<Live> | undefined;
  private readonly pending = new Map<string, Pending>();
  private readonly restartListeners: ((generation: number) => void)[] = [];
  private nextId = 1;
  private generation = 0;
  private failures = 0;
  private lastReplyAt = 0;
  private closed = false;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SidecarHostOptions) {}

  /** Greeting of the running process (starting one if none is). */
  async hello(): Promise<SidecarHello> {
    return (await this.up()).hello;
  }

  /** Calls `listener` with the new generation each time a replacement process is up; returns its removal. */
  onRestart(listener: (generation: number) => void): () => void {
    this.restartListeners.push(listener);
    return () => {
      const i = this.restartListeners.indexOf(listener);
      if (i >= 0) this.restartListeners.splice(i, 1);
    };
  }

  /**
   * Sends one request and resolves with its reply.
   * @throws SidecarRequestError when the sidecar answers `error`
   * @throws InferenceError `thread-crashed` when the process dies first, `closed` after close()
   */
  async request(meta: Readonly<Record<string, string | number>>, tensors?: Readonly<Record<string, OutTensor>>): Promise<Frame> {
    const live = await this.up();
    const id = String(this.nextId++);
    const chunks = encodeFrame({ ...meta, id }, tensors);
    const reply = await new Promise<Frame>((resolve, reject) => {
      const limitMs = meta["op"] === "load" ? (this.opts.loadTimeoutMs ?? 600_000) : (this.opts.hangTimeoutMs ?? 120_000);
      this.pending.set(id, { resolve, reject, sentAt: performance.now(), limitMs });
      live.socket.cork();
      for (const c of chunks) live.socket.write(c);
      live.socket.uncork();
    });
    if (reply.meta["op"] === "error") throw new SidecarRequestError(reply.meta["reason"] ?? "run-failed", reply.meta["message"] ?? "sidecar error");
    return reply;
  }

  /** Ends the process (it exits when its socket closes; killed after 5 s). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    const live = this.live ?? (await this.starting?.catch(() => undefined));
    this.failAll(new InferenceError("closed", `${this.opts.name} sidecar closed`));
    if (live === undefined) return;
    const exited = new Promise<void>((resolve) => {
      if (live.child.exitCode !== null || live.child.signalCode !== null) resolve();
      else live.child.once("exit", () => resolve());
    });
    live.socket.end();
    const timer = setTimeout(() => live.child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  }

  private up(): Promise<Live> {
    if (this.closed) return Promise.reject(new InferenceError("closed", `${this.opts.name} sidecar closed`));
    if (this.live !== undefined) return Promise.resolve(this.live);
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async start(): Promise<Live> {
    if (this.failures > 0) {
      const delay = Math.min(10_000, (this.opts.restartDelayMs ?? 500) * 2 ** (this.failures - 1));
      await new Promise((r) => setTimeout(r, delay));
      if (this.closed) throw new InferenceError("closed", `${this.opts.name} sidecar closed`);
    }
    const dir = await mkdtemp(join(tmpdir(), "shoal-sidecar-"));
    const path = join(dir, "sock");
    const server = createServer();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(path, () => resolve());
      });
      const live = await this.spawnAndGreet(server, path);
      this.failures = 0;
      this.lastReplyAt = performance.now();
      this.live = live;
      this.watch(live);
      this.opts.logger.info({ sidecar: this.opts.name, ...live.hello, generation: live.generation }, "runtime sidecar up");
      if (live.generation > 1) for (const l of [...this.restartListeners]) l(live.generation);
      return live;
    } catch (err) {
      this.failures++;
      throw err instanceof InferenceError
        ? err
        : new InferenceError("thread-crashed", `${this.opts.name} sidecar did not start: ${(err as Error).message}`, { cause: err });
    } finally {
      server.close();
      // The socket file is no longer needed once connected (or failed).
      void rm(dir, { recursive: true, force: true });
    }
  }

  private spawnAndGreet(server: Server, path: string): Promise<Live> {
    const { python, script, device, dtype, threads } = this.opts;
    const args = ["-B", script, "--socket", path, "--device", device, "--dtype", dtype, ...(threads > 0 ? ["--threads", String(threads)] : [])];
    const child = spawn(python, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, PYTHONUNBUFFERED: "1" } });
    const log = this.opts.logger;
    const name = this.opts.name;
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream! }).on("line", (line) => {
        if (line.trim() !== "" && !line.includes("Loading weights")) log.warn({ sidecar: name, pid: child.pid, line }, "sidecar output");
      });
    }
    return new Promise<Live>((resolve, reject) => {
      const fail = (why: string): void => {
        clearTimeout(timer);
        child.kill("SIGKILL");
        reject(new Error(why));
      };
      const timer = setTimeout(() => fail(`no hello within ${this.opts.startTimeoutMs ?? 120_000} ms`), this.opts.startTimeoutMs ?? 120_000);
      child.once("error", (err) => fail(`cannot run ${python}: ${err.message}`));
      child.once("exit", (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before saying hello`));
      server.once("connection", (socket: Socket) => {
        const reader = new FrameReader();
        let live: Live | undefined;
        socket.on("data", (chunk: Buffer) => {
          let frames: Frame[];
          try {
            frames = reader.push(chunk);
          } catch (err) {
            log.warn({ sidecar: name, err }, "sidecar sent a bad frame; restarting it");
            socket.destroy();
            return;
          }
          for (const f of frames) {
            if (live === undefined) {
              let hello: SidecarHello;
              try {
                hello = helloOf(f);
              } catch (err) {
                socket.destroy();
                return fail((err as Error).message);
              }
              clearTimeout(timer);
              child.removeAllListeners("exit");
              child.removeAllListeners("error");
              live = { child, socket, hello, generation: ++this.generation };
              child.once("exit", (code, signal) => this.lost(live!, `exited (${signal ?? `code ${code}`})`));
              resolve(live);
            } else this.settle(f);
          }
        });
        socket.on("close", () => (live === undefined ? fail("closed its socket before saying hello") : this.lost(live, "closed its socket")));
        socket.on("error", () => {});
      });
    });
  }

  private settle(f: Frame): void {
    const id = f.meta["id"] ?? "";
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.lastReplyAt = performance.now();
    this.pending.delete(id);
    p.resolve(f);
  }

  /** Health: an idle sidecar is pinged; a request (ping included) unanswered past its limit is a hang. */
  private watch(live: Live): void {
    clearInterval(this.watchdog);
    this.watchdog = setInterval(() => {
      if (this.live !== live) return;
      // The sidecar answers in order: only the oldest request is being worked on, since it was
      // sent or since the previous answer, whichever came later.
      const head = this.pending.values().next().value;
      if (head !== undefined && performance.now() - Math.max(head.sentAt, this.lastReplyAt) > head.limitMs) {
        this.opts.logger.warn({ sidecar: this.opts.name, pid: live.hello.pid, limitMs: head.limitMs }, "sidecar left a request unanswered; killing it");
        live.child.kill("SIGKILL");
        return;
      }
      if (this.pending.size === 0) this.request({ op: "ping" }).catch(() => {});
    }, this.opts.pingIntervalMs ?? 5000);
    this.watchdog.unref();
  }

  private lost(live: Live, why: string): void {
    if (this.live !== live) return;
    this.live = undefined;
    clearInterval(this.watchdog);
    live.socket.destroy();
    if (live.child.exitCode === null && live.child.signalCode === null) live.child.kill("SIGKILL");
    this.failAll(new InferenceError("thread-crashed", `${this.opts.name} sidecar (pid ${live.hello.pid}) ${why} during the run`));
    if (this.closed) return;
    this.failures++;
    this.opts.logger.warn({ sidecar: this.opts.name, pid: live.hello.pid, why }, "runtime sidecar lost; starting a new one");
    this.up().catch((err: unknown) =>
      this.opts.logger.warn({ sidecar: this.opts.name, err }, "runtime sidecar failed to restart; retrying on the next request"),
    );
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

function helloOf(f: Frame): SidecarHello {
  const m = f.meta;
  if (m["op"] !== "hello") throw new Error(`expected hello, got ${m["op"]}`);
  return { pid: Number(m["pid"]), device: m["device"] ?? "cpu", deviceName: m["deviceName"] ?? "", dtype: m["dtype"] ?? "", torch: m["torch"] ?? "" };
}
