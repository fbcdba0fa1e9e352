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
