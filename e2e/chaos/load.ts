/**
 * The campaign's clients: answers computed once, alone, before any fault (the references), and an
 * open-loop stream of Embed, Rerank, Classify and OpenAI-route (`POST /v1/embeddings`) calls with
 * deadlines, each recorded as the caller saw it (history.ts). Call i leaves at start + i / rate,
 * whatever happened to the earlier ones; the calls alternate between the gateways.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import type { ShoalClient } from "@shoal/client";
import { type CallKind, type CallRecord, digestOf, type ReferenceRecord, rounded } from "./history.ts";
import { LAB_MODELS } from "./lab.ts";
import { mulberry32 } from "@shoal/models";

/** Texts 0..TEXT_COUNT-1; the first QUERIES are rerank queries, the rest documents and inputs. */
const TEXT_COUNT = 40;
const QUERIES = 3;
const WORDS = ["reef", "current", "kelp", "tide", "harbor", "storm", "gull", "anchor", "coral", "drift", "shoal", "lantern"];

/** Text `id`: distinct words per id, so every text's vector differs. */
export function textOf(id: number): string {
  const w = (k: number): string => WORDS[(id * 7 + k * 5) % WORDS.length]!;
  return `chaos text ${id}: ${w(0)} ${w(1)} ${w(2)} near ${w(3)}${" again".repeat(id % 4)}`;
}

/** The numbers a history keeps of an answer: vectors concatenated; rerank scores in document order; classify scores by label name. */
export const resultOf = {
  embed: (vectors: readonly Float32Array[]): number[] => rounded(vectors.flatMap((v) => [...v])),
  rerank: (hits: readonly { index: number; score: number }[]): number[] => rounded([...hits].sort((a, b) => a.index - b.index).map((h) => h.score)),
  classify: (cs: readonly { labels: readonly { label: string; score: number }[] }[]): number[] =>
    rounded(cs.flatMap((c) => [...c.labels].sort((a, b) => a.label.localeCompare(b.label)).map((l) => l.score))),
};

/** One call at a time, one unit each: every text's vector and labels, every query-document score. */
export async function computeReferences(client: ShoalClient): Promise<ReferenceRecord[]> {
  const out: ReferenceRecord[] = [];
  const timeoutMs = 30_000;
  for (let id = 0; id < TEXT_COUNT; id++) {
    const e = await client.embed(LAB_MODELS.embed, [textOf(id)], { timeoutMs });
    out.push({ type: "reference", kind: "embed", key: String(id), result: resultOf.embed(e.vectors) });
    const c = await client.classify(LAB_MODELS.classify, [textOf(id)], { timeoutMs });
    out.push({ type: "reference", kind: "classify", key: String(id), result: resultOf.classify(c.classifications) });
    if (id < QUERIES) continue;
    for (let q = 0; q < QUERIES; q++) {
      const r = await client.rerank(LAB_MODELS.rerank, textOf(q), [textOf(id)], { timeoutMs });
      out.push({ type: "reference", kind: "rerank", key: `${q}:${id}`, result: resultOf.rerank(r.results) });
    }
  }
  return out;
}

/** Draws call i's kind and texts (1-3 inputs; rerank: a query, then 1-3 documents). */
export function drawCall(rand: () => number): { kind: CallKind; textIds: number[] } {
  const x = rand();
  const kind: CallKind = x < 0.35 ? "embed" : x < 0.6 ? "rerank" : x < 0.85 ? "classify" : "openai";
  const n = 1 + Math.floor(rand() * 3);
  const ids = Array.from({ length: n }, () => QUERIES + Math.floor(rand() * (TEXT_COUNT - QUERIES)));
  return { kind, textIds: kind === "rerank" ? [Math.floor(rand() * QUERIES), ...ids] : ids };
}

/** The code name of a failed call (a fetch error of the OpenAI route mapped like Connect's). */
function codeName(err: unknown): { outcome: string; message: string } {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) return { outcome: "DeadlineExceeded", message: err.message };
  if (err instanceof TypeError) return { outcome: "Unavailable", message: `fetch: ${err.message}` };
  const e = ConnectError.from(err);
  return { outcome: Code[e.code], message: e.rawMessage.slice(0, 300) };
}

const HTTP_CODES: Readonly<Record<number, string>> = {
  400: "InvalidArgument",
  404: "NotFound",
  429: "ResourceExhausted",
  499: "Canceled",
  500: "Internal",
  503: "Unavailable",
  504: "DeadlineExceeded",
};

/** `POST /v1/embeddings` with a client-side deadline and no retries. */
async function openaiEmbed(baseUrl: string, texts: string[], deadlineMs: number): Promise<number[]> {
  const res = await fetch(`${baseUrl}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: LAB_MODELS.embed, input: texts }),
    signal: AbortSignal.timeout(deadlineMs),
  });
  const body = (await res.json()) as { data?: { index: number; embedding: number[] }[]; error?: { message?: string } };
  if (!res.ok) throw new ConnectError(`HTTP ${res.status}: ${body.error?.message ?? ""}`, Code[(HTTP_CODES[res.status] ?? "Unknown") as keyof typeof Code]);
  return rounded((body.data ?? []).sort((a, b) => a.index - b.index).flatMap((d) => d.embedding));
}

/** One gateway as the load sees it. */
export interface LoadTarget {
  readonly label: string;
  readonly url: string;
  readonly client: ShoalClient;
}

/** Runs one call to its end and returns its record (the record's endMs stays null until it ends). */
async function runCall(id: number, kind: CallKind, textIds: number[], gw: LoadTarget, deadlineMs: number, out: Map<number, CallRecord>): Promise<void> {
  const sentMs = Date.now();
  const base = { type: "call" as const, id, kind, textIds, gateway: gw.label, sentMs, deadlineMs };
  out.set(id, { ...base, endMs: null, outcome: "none" });
  const texts = textIds.map(textOf);
  try {
    let result: number[];
    if (kind === "embed") result = resultOf.embed((await gw.client.embed(LAB_MODELS.embed, texts, { timeoutMs: deadlineMs })).vectors);
    else if (kind === "classify") result = resultOf.classify((await gw.client.classify(LAB_MODELS.classify, texts, { timeoutMs: deadlineMs })).classifications);
    else if (kind === "rerank")
      result = resultOf.rerank((await gw.client.rerank(LAB_MODELS.rerank, texts[0]!, texts.slice(1), { timeoutMs: deadlineMs })).results);
    else result = await openaiEmbed(gw.url, texts, deadlineMs);
    out.set(id, { ...base, endMs: Date.now(), outcome: "OK", result, digest: digestOf(result) });
  } catch (err) {
    out.set(id, { ...base, endMs: Date.now(), ...codeName(err) });
  }
}

/**
 * Runs the open-loop load for `durationMs` from `startMs` (Date.now() ms), then waits for every call
 * to end, at most its deadline plus `settleMs`; a call still open then stays recorded as silent.
 */
export async function runLoad(o: {
  targets: () => readonly LoadTarget[];
  seed: number;
  ratePerS: number;
  durationMs: number;
  deadlineMs: number;
  settleMs: number;
  startMs: number;
}): Promise<CallRecord[]> {
  const rand = mulberry32(o.seed ^ 0x5bd1e995);
  const out = new Map<number, CallRecord>();
  const pending = new Set<Promise<void>>();
  for (let i = 0; ; i++) {
    const due = o.startMs + (i * 1000) / o.ratePerS;
    if (due >= o.startMs + o.durationMs) break;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const { kind, textIds } = drawCall(rand);
    const targets = o.targets();
    const p = runCall(i, kind, textIds, targets[i % targets.length]!, o.deadlineMs, out);
    pending.add(p);
    void p.finally(() => pending.delete(p));
  }
  const until = Date.now() + o.deadlineMs + o.settleMs;
  while (pending.size > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  return [...out.values()].sort((a, b) => a.id - b.id);
}
