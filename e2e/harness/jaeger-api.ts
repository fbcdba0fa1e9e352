/** The parts of Jaeger's query API (`/api/traces/{id}`) the tests read. */
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: "CHILD_OF" | "FOLLOWS_FROM"; traceID: string; spanID: string }[];
  processID: string;
  tags: { key: string; value: unknown }[];
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

/** Fetches a trace, or undefined while Jaeger has not got it. */
export async function getTrace(queryUrl: string, traceId: string): Promise<JaegerTrace | undefined> {
  const res = await fetch(`${queryUrl}/api/traces/${traceId}`);
  if (res.status === 404) return undefined;
  if (!res.ok) throw new Error(`Jaeger ${res.status}: ${await res.text()}`);
  const body = (await res.json()) as { data?: JaegerTrace[] };
  return body.data?.[0];
}

/** Polls until `ready(trace)` holds (spans arrive in batches from several services). */
export async function waitForTrace(queryUrl: string, traceId: string, ready: (t: JaegerTrace) => boolean, timeoutMs = 30_000): Promise<JaegerTrace> {
  const started = Date.now();
  let last: JaegerTrace | undefined;
  while (Date.now() - started < timeoutMs) {
    last = await getTrace(queryUrl, traceId);
    if (last && ready(last)) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`trace ${traceId} incomplete after ${timeoutMs} ms: ${last?.spans.map((s) => s.operationName).join(", ") ?? "absent"}`);
}

export function serviceOf(t: JaegerTrace, s: JaegerSpan): string {
  return t.processes[s.processID]?.serviceName ?? "?";
}

export function parentOf(s: JaegerSpan): string | undefined {
  return s.references.find((r) => r.refType === "CHILD_OF")?.spanID;
}

/** Random W3C ids: a client that sends `traceparent` owns the root. */
export function newTraceparent(): { traceId: string; spanId: string; header: string } {
  const hex = (n: number): string => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join("");
  const traceId = hex(32);
  const spanId = hex(16);
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}
