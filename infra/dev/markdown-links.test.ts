import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { REPO_ROOT } from "./shell.ts";
import { anchorsOf, headingSlug, isExternal, linksOf } from "./markdown-links.ts";

test("headingSlug follows GitHub's rule: markup and punctuation out, spaces to hyphens", () => {
  assert.equal(headingSlug("Cost of a small request (`npm run bench:cost`)"), "cost-of-a-small-request-npm-run-benchcost");
  assert.equal(headingSlug("Fleets of models (residency)"), "fleets-of-models-residency");
  assert.equal(headingSlug("The shared queue (Kafka share groups)"), "the-shared-queue-kafka-share-groups");
  assert.equal(headingSlug("Kafka TLS and SASL"), "kafka-tls-and-sasl");
  assert.equal(headingSlug("TypeScript (`@shoal/client`)"), "typescript-shoalclient");
  assert.equal(headingSlug("Served ÷ ceiling, [the runs](x.md)"), "served--ceiling-the-runs");
});

test("anchorsOf numbers repeated headings and reads <a id>; code blocks define nothing", () => {
  const md = ["# Top", "## Runs", "## Runs", '<a id="cost-status"></a>**Where**', "```sh", "# not a heading", "```"].join("\n");
  assert.deepEqual([...anchorsOf(md)].sort(), ["cost-status", "runs", "runs-1", "top"]);
});

test("linksOf finds links and images outside code, with their lines", () => {
  const md = ["See [a](docs/a.md#x) and ![c](docs/c.svg).", "`[not](a link)`", "```", "[nor](this.md)", "```", "[out](https://example.org)"].join("\n");
  assert.deepEqual(linksOf(md), [
    { target: "docs/a.md#x", line: 1 },
    { target: "docs/c.svg", line: 1 },
    { target: "https://example.org", line: 6 },
  ]);
  assert.equal(isExternal("https://example.org"), true);
  assert.equal(isExternal("docs/a.md"), false);
});

test("every relative link in the repository's Markdown names a file that exists, and an anchor it defines", () => {
  const files = execFileSync("git", ["ls-files", "*.md"], { cwd: REPO_ROOT, encoding: "utf8" })
    .split("\n")
    .filter((f) => f !== "" && existsSync(join(REPO_ROOT, f)));
  assert.ok(files.includes("README.md") && files.includes("docs/benchmarks.md"), "the README and the benchmark record are checked");
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string): Set<string> => {
    const known = anchors.get(path);
    if (known) return known;
    const found = anchorsOf(readFileSync(path, "utf8"));
    anchors.set(path, found);
    return found;
  };
  const broken: string[] = [];
  let checked = 0;
  for (const file of files) {
    const path = join(REPO_ROOT, file);
    for (const { target, line } of linksOf(readFileSync(path, "utf8"))) {
      if (isExternal(target)) continue;
      checked += 1;
      const [pathPart = "", anchor] = target.split("#", 2);
      const resolved = pathPart === "" ? path : join(dirname(path), decodeURIComponent(pathPart));
      const where = `${file}:${line} → ${target}`;
      if (!existsSync(resolved)) broken.push(`${where} (no such file: ${relative(REPO_ROOT, resolved)})`);
      else if (anchor && statSync(resolved).isFile() && resolved.endsWith(".md") && !anchorsIn(resolved).has(anchor)) broken.push(`${where} (no such anchor)`);
    }
  }
  assert.ok(checked > 100, `only ${checked} relative links found`);
  assert.deepEqual(broken, []);
});
