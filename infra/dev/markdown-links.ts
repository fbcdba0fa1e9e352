/**
 * The links of a Markdown file and the anchors it defines, as GitHub renders them: enough to check
 * that the README and docs point at files and sections that exist (`markdown-links.test.ts`).
 */

/** A link's target as written, with the line it is on (1-based). */
export interface MarkdownLink {
  readonly target: string;
  readonly line: number;
}

const FENCE = /^\s*(```|~~~)/;

/** Each line outside fenced code blocks, with its 1-based number. */
function* proseLines(markdown: string): Generator<[string, number]> {
  let fenced = false;
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (FENCE.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) yield [line, i + 1];
  }
}

/** GitHub's anchor for a heading's text: markup dropped, lower case, punctuation out, spaces to hyphens. */
export function headingSlug(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors a file defines: its headings' slugs (a repeated one numbered -1, -2...) and `<a id>`s. */
export function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const [line] of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const slug = headingSlug(heading[1]!);
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      out.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  }
  return out;
}

/** Inline links and images outside code: `[text](target)` and `![alt](target)`, code spans skipped. */
export function linksOf(markdown: string): MarkdownLink[] {
  const out: MarkdownLink[] = [];
  for (const [raw, line] of proseLines(markdown)) {
    const text = raw.replace(/`[^`]*`/g, "``");
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1]!, line });
  }
  return out;
}

/** A target that leaves the repository (a scheme such as https: or mailto:). */
export function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target);
}
