/** Reads the broker's request log (kafka.request.logger at DEBUG) for `bench:requests` and e2e/lag-reads.test.ts. */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScratchBroker, type ScratchBroker } from "../../infra/dev/broker.ts";
import { REPO_ROOT } from "../../infra/dev/shell.ts";

/** One request the broker completed: when, who, what. */
export interface Logged {
  readonly atMs: number;
  readonly client: string;
  readonly api: string;
}

/** Parses the request log's "Completed request:{json}" lines (log4j pattern `[%d] %m`). */
export function parseRequestLog(text: string): Logged[] {
  const out: Logged[] = [];
  for (const line of text.split("\n")) {
    const at = line.indexOf("Completed request:");
    if (at < 0) continue;
    const stamp = /^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\]/.exec(line);
    if (!stamp) continue;
    try {
      const json = JSON.parse(line.slice(at + "Completed request:".length).replace(/ \([^()]*\)$/, "")) as {
        requestHeader?: { clientId?: string; requestApiKeyName?: string; requestApiKey?: number };
      };
      const h = json.requestHeader ?? {};
      out.push({
        atMs: Date.parse(`${stamp[1]}T${stamp[2]}.${stamp[3]}Z`),
        client: String(h.clientId ?? "?"),
        api: String(h.requestApiKeyName ?? h.requestApiKey ?? "?"),
      });
    } catch {
      // A line cut by the file's rotation: skip it.
    }
  }
  return out;
}

/** Requests per second by `client api`, within [fromMs, toMs). */
export function ratesBetween(entries: readonly Logged[], fromMs: number, toMs: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of entries) {
    if (e.atMs < fromMs || e.atMs >= toMs) continue;
    // Instance ids (random suffixes) make every run's client ids differ: keep the role.
    const client = e.client.replace(/-t?[0-9a-f]{6,}(?=-|$)/g, "").replace(/-\d+$/, "-N");
    const key = `${client} ${e.api}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const seconds = (toMs - fromMs) / 1000;
  return new Map([...counts].map(([k, n]) => [k, n / seconds] as const).sort((a, b) => b[1] - a[1]));
}

/** A scratch broker that logs every request it completes, and a way to read that log. */
export interface RequestLoggedBroker {
  readonly broker: ScratchBroker;
  /** Every request completed so far. */
  requests(): Promise<Logged[]>;
  /** Stops the broker and removes its log. */
  stop(): Promise<void>;
}

/**
 * Starts a scratch broker with kafka.request.logger at DEBUG into a file of its own (the request
 * log needs the broker's JVM flags, so this is a broker of the caller's, not the test run's).
 */
export async function startRequestLoggedBroker(): Promise<RequestLoggedBroker> {
  const dir = await mkdtemp(join(tmpdir(), "shoal-reqlog-"));
  const requestLog = join(dir, "requests.log");
  const extraConfig = join(dir, "request-log4j2.properties");
  await writeFile(
    extraConfig,
    [
      "appender.requests.type = File",
      "appender.requests.name = requestsLog",
      `appender.requests.fileName = ${requestLog}`,
      "appender.requests.layout.type = PatternLayout",
      "appender.requests.layout.pattern = [%d{yyyy-MM-dd HH:mm:ss,SSS}{UTC}] %m%n",
      "logger.request.name = kafka.request.logger",
      "logger.request.level = DEBUG",
      "logger.request.additivity = false",
      "logger.request.appenderRef.requests.ref = requestsLog",
      "",
    ].join("\n"),
  );
  const saved = process.env["KAFKA_OPTS"];
  process.env["KAFKA_OPTS"] = `-Dlog4j2.configurationFile=${join(REPO_ROOT, "infra/kafka/log4j2.properties")},${extraConfig}`;
  let broker: ScratchBroker;
  try {
    broker = await startScratchBroker();
  } finally {
    if (saved === undefined) delete process.env["KAFKA_OPTS"];
    else process.env["KAFKA_OPTS"] = saved;
  }
  return {
    broker,
    requests: async () => parseRequestLog(await readFile(requestLog, "utf8").catch(() => "")),
    async stop() {
      await broker.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
