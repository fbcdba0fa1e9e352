import assert from "node:assert/strict";
import { test } from "node:test";
import { LineSplitter, linesOf, parseLine, validateLines, type RawLine } from "./batch-lines.ts";

const EP = "/v1/embeddings";
const line = (custom_id: unknown, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ custom_id, method: "POST", url: EP, body: { model: "m", input: "hi" }, ...extra });

async function* chunked(text: string, size: number): AsyncGenerator<Buffer> {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function collect(lines: AsyncIterable<RawLine>): Promise<RawLine[]> {
  const out: RawLine[] = [];
  for await (const l of lines) out.push(l);
  return out;
}

test("LineSplitter: lines across chunk boundaries of any size, CRLF, a multi-byte character cut in two, no final newline", async () => {
  const text = "first line\r\nsécond — ünïcode ✓\n\nlast without newline";
  for (const size of [1, 2, 3, 5, 7, 64]) {
    const lines = await collect(linesOf(chunked(text, size)));
    assert.deepEqual(
      lines,
      [
        { index: 0, text: "first line" },
        { index: 1, text: "sécond — ünïcode ✓" },
        { index: 2, text: "" },
        { index: 3, text: "last without newline" },
      ],
      `chunk size ${size}`,
    );
  }
  const s = new LineSplitter();
  assert.deepEqual(s.push(Buffer.from("a\n")), [{ index: 0, text: "a" }]);
  assert.deepEqual(s.end(), []);
});

test("parseLine: the OpenAI line shape; each kind of bad line gets its code, param and 1-based line", () => {
  assert.deepEqual(parseLine({ index: 0, text: line("a") }, EP), { index: 0, customId: "a", body: { model: "m", input: "hi" } });
  const cases: Array<[string, string, string | null]> = [
    ["not json", "invalid_json_line", null],
    ["[1,2]", "invalid_json_line", null],
    [line(7), "missing_required_parameter", "custom_id"],
    [line("a", { method: "GET" }), "invalid_method", "method"],
    [line("a", { url: "/v1/chat/completions" }), "invalid_url", "url"],
    [line("a", { body: "text" }), "invalid_value", "body"],
  ];
  for (const [text, code, param] of cases) {
    const got = parseLine({ index: 4, text }, EP);
    assert.ok("code" in got, text);
    assert.equal(got.code, code, text);
    assert.equal(got.param, param, text);
    assert.equal(got.line, 5);
  }
});

test("validateLines: a valid file counts its requests (blank lines skipped); duplicates, limits and an empty file are errors", async () => {
  const limits = { maxLines: 3, maxErrors: 10 };
  const ok = await validateLines(linesOf(chunked([line("a"), "", line("b"), line("c")].join("\n"), 5)), EP, limits);
  assert.deepEqual(ok, { total: 3, errors: [] });

  const dup = await validateLines(linesOf(chunked([line("a"), line("b"), line("a")].join("\n"), 9)), EP, limits);
  assert.equal(dup.errors.length, 1);
  assert.deepEqual({ code: dup.errors[0]!.code, line: dup.errors[0]!.line }, { code: "duplicate_custom_id", line: 3 });

  const many = await validateLines(linesOf(chunked([line("a"), line("b"), line("c"), line("d")].join("\n"), 100)), EP, limits);
  assert.deepEqual(
    many.errors.map((e) => e.code),
    ["too_many_requests"],
  );

  const empty = await validateLines(linesOf(chunked("\n\n", 100)), EP, limits);
  assert.deepEqual(
    empty.errors.map((e) => e.code),
    ["empty_file"],
  );

  const notJsonl = await validateLines(linesOf(chunked("a,b,c\n1,2,3\n", 100)), EP, { maxLines: 10, maxErrors: 1 });
  assert.deepEqual(
    notJsonl.errors.map((e) => [e.code, e.line]),
    [
      ["invalid_json_line", 1],
      ["more_errors", null],
    ],
  );
});
