/** Reads the broker's request log (kafka.request.logger at DEBUG) for `bench:requests`. */

/** One request the broker completed: when, who, what. */
export interface Logged {
  readonly atMs: number;
  readonly client: string;
  readonly api: string;
}

/** One request the broker completed, with its request and response bodies and where its time went. */
export interface Completed extends Logged {
  /** Time from arrival to the response sent; `atMs − totalMs` is its arrival. */
  readonly totalMs: number;
  /** Time waiting at the broker (a fetch's wait for records, a Produce's for replicas). */
  readonly remoteMs: number;
  /** The Shoal pool in the client id (`shoal-<service>-<pool>-<instance>`), if any. */
  readonly pool: string | undefined;
  /** `gateway`, `worker` or the client id's first word. */
  readonly role: string;
  readonly request: unknown;
  readonly response: unknown;
}

/** Parses the request log's "Completed request:{json}" lines (log4j pattern `[%d] %m`), bodies included. */
export function parseCompleted(text: string): Completed[] {
  const out: Completed[] = [];
  for (const line of text.split("\n")) {
    const at = line.indexOf("Completed request:");
    if (at < 0) continue;
    const stamp = /^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d),(\d{3})\]/.exec(line);
    if (!stamp) continue;
    try {
      const json = JSON.parse(line.slice(at + "Completed request:".length).replace(/ \([^()]*\)$/, "")) as {
        requestHeader?: { clientId?: string; requestApiKeyName?: string; requestApiKey?: number };
        request?: unknown;
        response?: unknown;
        totalTimeMs?: number;
        remoteTimeMs?: number;
      };
      const h = json.requestHeader ?? {};
      const client = String(h.clientId ?? "?");
      out.push({
        atMs: Date.parse(`${stamp[1]}T${stamp[2]}.${stamp[3]}Z`),
        client,
        api: String(h.requestApiKeyName ?? h.requestApiKey ?? "?"),
        totalMs: json.totalTimeMs ?? 0,
        remoteMs: json.remoteTimeMs ?? 0,
        ...roleOf(client),
        request: json.request,
        response: json.response,
      });
    } catch {
      // A line cut by the file's rotation: skip it.
    }
  }
  return out;
}

/** The service and pool a Shoal client id names (`shoal-worker-t1a2b3c4d-w0-1`). */
export function roleOf(client: string): { role: string; pool: string | undefined } {
  const m = /^shoal-(gateway|worker)-([a-z0-9]+)-/.exec(client);
  return m ? { role: m[1]!, pool: m[2] } : { role: client.split("-")[0] ?? client, pool: undefined };
}

/** Parses the request log's "Completed request:{json}" lines (log4j pattern `[%d] %m`). */
export function parseRequestLog(text: string): Logged[] {
  return parseCompleted(text).map(({ atMs, client, api }) => ({ atMs, client, api }));
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
