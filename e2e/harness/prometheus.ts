import parsePrometheusTextFormat from "parse-prometheus-text-format";

type Families = ReturnType<typeof parsePrometheusTextFormat>;

/** A scraped endpoint: the parsed families (parsing proves the format) and the raw text. */
export interface Scrape {
  readonly families: Families;
  readonly text: string;
}

/** Scrapes and parses a Prometheus text endpoint (throws if it does not parse). */
export async function scrape(url: string, apiKey?: string): Promise<Scrape> {
  const res = await fetch(url, apiKey === undefined ? {} : { headers: { authorization: `Bearer ${apiKey}` } });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  const text = await res.text();
  return { families: parsePrometheusTextFormat(text), text };
}

/** Sum of a counter/gauge family's samples whose labels include `match`. */
export function total(s: Scrape, name: string, match: Record<string, string> = {}): number {
  const family = s.families.find((f) => f.name === name);
  if (!family) return 0;
  return family.metrics.filter((m) => Object.entries(match).every(([k, v]) => m.labels?.[k] === v)).reduce((n, m) => n + Number(m.value ?? 0), 0);
}

/** The `_${suffix}` series of a histogram whose labels include `match`, summed (the parser folds histograms into buckets and drops their labels). */
function histogramSeries(s: Scrape, name: string, suffix: "count" | "sum", match: Record<string, string>): number {
  let n = 0;
  for (const line of s.text.split("\n")) {
    if (!line.startsWith(`${name}_${suffix}`)) continue;
    if (!Object.entries(match).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    n += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return n;
}

/** Observations of a histogram whose labels include `match`, read from its `_count` series. */
export function histogramCount(s: Scrape, name: string, match: Record<string, string> = {}): number {
  return histogramSeries(s, name, "count", match);
}

/** The sum of a histogram's observations whose labels include `match`, read from its `_sum` series. */
export function histogramSum(s: Scrape, name: string, match: Record<string, string> = {}): number {
  return histogramSeries(s, name, "sum", match);
}

/** Whether a metric family is exposed. */
export function has(s: Scrape, name: string): boolean {
  return s.families.some((f) => f.name === name);
}

/** A histogram's cumulative bucket counts by upper bound (`+Inf` as Infinity), summed over the series whose labels include `match`. */
export function histogramBuckets(s: Scrape, name: string, match: Record<string, string> = {}): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of s.text.split("\n")) {
    if (!line.startsWith(`${name}_bucket{`)) continue;
    if (!Object.entries(match).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    const le = /[{,]le="([^"]+)"/.exec(line)?.[1];
    if (le === undefined) continue;
    const bound = le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}

/**
 * The `q` quantile of the observations a histogram gained between two scrapes, interpolated
 * within its bucket as Prometheus' histogram_quantile does (the highest finite bound when it falls
 * in `+Inf`); and the upper bound of the highest bucket that gained any (the worst observation,
 * to a bucket). NaN when nothing was observed.
 */
export function histogramDelta(before: Map<number, number>, after: Map<number, number>, q: number): { quantile: number; worstBucket: number; count: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const cumulative = bounds.map((b) => (after.get(b) ?? 0) - (before.get(b) ?? 0));
  const count = cumulative[cumulative.length - 1] ?? 0;
  if (count <= 0) return { quantile: Number.NaN, worstBucket: Number.NaN, count: 0 };
  const rank = q * count;
  let quantile = Number.NaN;
  for (let i = 0; i < bounds.length; i++) {
    if (cumulative[i]! < rank) continue;
    const upper = bounds[i]!;
    const lower = i === 0 ? 0 : bounds[i - 1]!;
    const below = i === 0 ? 0 : cumulative[i - 1]!;
    quantile = upper === Number.POSITIVE_INFINITY ? lower : lower + ((upper - lower) * (rank - below)) / (cumulative[i]! - below);
    break;
  }
  const first = cumulative.findIndex((c) => c === count);
  return { quantile, worstBucket: bounds[first]!, count };
}
