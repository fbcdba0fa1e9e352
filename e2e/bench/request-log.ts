/** Reads the broker's request log (kafka.request.logger at DEBUG) for `bench:requests`. */

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
